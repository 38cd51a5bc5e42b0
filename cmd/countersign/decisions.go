package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/sidecar/client"
)

func newDecisionsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "decisions",
		Short: "Read the decision log",
	}
	cmd.AddCommand(newDecisionsExportCmd())
	return cmd
}

func newDecisionsExportCmd() *cobra.Command {
	var (
		data, since, until, out string
		timeout                 time.Duration
		remote                  remoteFlags
		q                       client.DecisionExport
	)
	cmd := &cobra.Command{
		Use:   "export (--data DIR | --sidecar URL --token-file F) [--since T] [--until T] [--workflow W] [-o FILE]",
		Short: "Write the decision log as NDJSON in OPA's decision-log shape",
		Long: `Write the decisions a sidecar logged, oldest first, one JSON object a line,
in the shape of OPA's decision log: decision_id, timestamp, path, input (the
document the policy evaluated), result and bundles.countersign (revision
and digest), with the workflow, step and rule beside them: the same records
GET /v1/decisions answers, which tools that read OPA decision logs accept.

--since and --until (RFC 3339) bound the decisions' times, --since
inclusive and --until exclusive; --workflow keeps one workflow's. With
--data DIR it reads a stopped sidecar's DIR/sidecar.db (a running one holds
its lock). With --sidecar URL and an operator's or a lead's --token-file
it streams GET /v1/decisions?format=ndjson from the running sidecar
instead, and also takes --from (a decision's seq), --rep and --rule.`,
		Example: `  countersign decisions export --data /tmp/cs > decisions.ndjson
  countersign decisions export --data /tmp/cs --since 2026-11-29T00:00:00Z -o day.ndjson
  countersign decisions export --sidecar http://127.0.0.1:8080 --token-file ops.jwt --rule R7-refund-needs-approval`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if q.Since, err = flagTime("since", since); err != nil {
				return err
			}
			if q.Until, err = flagTime("until", until); err != nil {
				return err
			}
			switch {
			case data != "" && remote.set():
				return errors.New("--data and --sidecar: choose one; --data reads a stopped sidecar's files, --sidecar asks a running one")
			case data != "" && (q.From > 0 || q.Rep != "" || q.Rule != ""):
				return errors.New("--from, --rep and --rule select from a running sidecar's export (--sidecar); with --data use --since, --until and --workflow")
			case data == "" && !remote.set():
				return errors.New("say where the log is: --data DIR (a stopped sidecar's data directory) or --sidecar URL --token-file F (a running one)")
			}
			if data == "" {
				c, err := remote.client()
				if err != nil {
					return err
				}
				return writeExport(cmd.OutOrStdout(), cmd.ErrOrStderr(), out, "decisions", func(w io.Writer) (int, error) {
					return c.ExportDecisionLog(cmd.Context(), q, w)
				})
			}
			db, err := openStopped(data, timeout, "countersign decisions export --sidecar URL --token-file F, or GET /v1/decisions?format=ndjson")
			if err != nil {
				return err
			}
			defer db.Close()
			f := store.DecisionFilter{Workflow: q.Workflow, Since: q.Since, Until: q.Until}
			return writeExport(cmd.OutOrStdout(), cmd.ErrOrStderr(), out, "decisions", func(w io.Writer) (int, error) {
				return exportDecisions(db, f, w)
			})
		},
	}
	cmd.Flags().StringVar(&data, "data", "", "the stopped sidecar's data directory (holds sidecar.db)")
	cmd.Flags().StringVar(&since, "since", "", "only decisions made at or after this RFC 3339 time")
	cmd.Flags().StringVar(&until, "until", "", "only decisions made before this RFC 3339 time")
	cmd.Flags().StringVar(&q.Workflow, "workflow", "", "only this workflow's decisions")
	cmd.Flags().StringVarP(&out, "output", "o", "", "write to this file instead of standard output")
	cmd.Flags().DurationVar(&timeout, "lock-timeout", time.Second, "how long to wait for a running sidecar to release the file")
	remote.add(cmd.Flags(), "an operator's or a lead's")
	cmd.Flags().Uint64Var(&q.From, "from", 0, "with --sidecar: start at the decision with this seq")
	cmd.Flags().StringVar(&q.Rep, "rep", "", "with --sidecar: only the decisions on this rep's calls")
	cmd.Flags().StringVar(&q.Rule, "rule", "", "with --sidecar: only the decisions of this rule")
	return cmd
}

// exportDecisions writes every decision f selects to w as a LogEntry, one
// a line, and returns how many it wrote.
func exportDecisions(db *store.DB, f store.DecisionFilter, w io.Writer) (int, error) {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	n := 0
	err := db.View(func(tx *store.Tx) error {
		return tx.EachDecision(f, func(d store.Decision) error {
			n++
			return enc.Encode(engine.NewLogEntry(d))
		})
	})
	if err != nil {
		return n, fmt.Errorf("export decisions: %w", err)
	}
	return n, bw.Flush()
}

// flagTime parses an RFC 3339 flag value; "" is the zero time.
func flagTime(name, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return t, fmt.Errorf("--%s %q is not an RFC 3339 time; write it like 2026-11-29T09:00:00Z", name, v)
	}
	return t, nil
}
