package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/store"
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
		data, since, until, workflow, out string
		timeout                           time.Duration
	)
	cmd := &cobra.Command{
		Use:   "export --data DIR [--since T] [--until T] [--workflow W] [-o FILE]",
		Short: "Write the decision log in DIR/sidecar.db as NDJSON in OPA's decision-log shape",
		Long: `Write the decisions a stopped sidecar logged in DIR/sidecar.db, oldest first,
one JSON object a line, in the shape of OPA's decision log: decision_id,
timestamp, path, input (the document the policy evaluated), result and
bundles.countersign (revision and digest), with the workflow, step and rule
beside them: the same records GET /v1/decisions answers, which tools that
read OPA decision logs accept.

--since and --until (RFC 3339) bound the decisions' times, --since
inclusive and --until exclusive; --workflow keeps one workflow's. The
sidecar must be stopped (it holds the store's lock); while it runs, page
through GET /v1/decisions instead.`,
		Example: `  countersign decisions export --data /tmp/cs > decisions.ndjson
  countersign decisions export --data /tmp/cs --since 2026-11-29T00:00:00Z -o day.ndjson`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f := store.DecisionFilter{Workflow: workflow}
			var err error
			if f.Since, err = flagTime("since", since); err != nil {
				return err
			}
			if f.Until, err = flagTime("until", until); err != nil {
				return err
			}
			db, err := openStopped(data, timeout, "GET /v1/decisions")
			if err != nil {
				return err
			}
			defer db.Close()
			if out == "" {
				_, err := exportDecisions(db, f, cmd.OutOrStdout())
				return err
			}
			file, err := os.Create(out)
			if err != nil {
				return err
			}
			n, err := exportDecisions(db, f, file)
			if cerr := file.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				os.Remove(out) // no half an export under the name asked for
				return err
			}
			_, err = fmt.Fprintf(cmd.ErrOrStderr(), "wrote %d decisions to %s\n", n, out)
			return err
		},
	}
	cmd.Flags().StringVar(&data, "data", "", "the sidecar's data directory (holds sidecar.db)")
	cmd.Flags().StringVar(&since, "since", "", "only decisions made at or after this RFC 3339 time")
	cmd.Flags().StringVar(&until, "until", "", "only decisions made before this RFC 3339 time")
	cmd.Flags().StringVar(&workflow, "workflow", "", "only this workflow's decisions")
	cmd.Flags().StringVarP(&out, "output", "o", "", "write to this file instead of standard output")
	cmd.Flags().DurationVar(&timeout, "lock-timeout", time.Second, "how long to wait for a running sidecar to release the file")
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
