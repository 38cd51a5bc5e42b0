package main

import (
	"cmp"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/countersign/countersign/executor/effectiveness"
)

func newEffectivenessCmd() *cobra.Command {
	var (
		data, since string
		asJSON      bool
		timeout     time.Duration
	)
	cmd := &cobra.Command{
		Use:   "effectiveness --data DIR [--since T]",
		Short: "Report how the controls did, per tool and agent version",
		Long: `Report, from the records of a stopped sidecar in DIR, per tool and agent
version: proposals, schema rejections, policy denials by rule, shadowed
steps, approval requests and how they ended (approved, rejected, expired,
pending; the overturn rate is rejected over approved plus rejected) with the
median time to approval, duplicates suppressed, unknown outcomes (still open
or resolved by lookup) and compensations. It is the evidence for moving a
tool from shadow to approval_only to auto. While the sidecar runs, ask it:
GET /v1/effectiveness?since=T; /metrics has the same figures over all time.`,
		Example: `  countersign effectiveness --data /tmp/cs
  countersign effectiveness --data /tmp/cs --since 2026-11-01T00:00:00Z --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var from time.Time
			if since != "" {
				var err error
				if from, err = time.Parse(time.RFC3339, since); err != nil {
					return fmt.Errorf("--since %q is not an RFC 3339 time; write it like 2026-11-29T09:00:00Z", since)
				}
			}
			db, err := openStopped(data, timeout, "GET /v1/effectiveness")
			if err != nil {
				return err
			}
			defer db.Close()
			r, err := effectiveness.Compute(db, from, time.Now())
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), r)
			}
			return printEffectiveness(cmd.OutOrStdout(), r)
		},
	}
	cmd.Flags().StringVar(&data, "data", "", "the sidecar's data directory (holds sidecar.db)")
	cmd.Flags().StringVar(&since, "since", "", "count records from this RFC 3339 time (default: all)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	cmd.Flags().DurationVar(&timeout, "lock-timeout", time.Second, "how long to wait for a running sidecar to release the file")
	return cmd
}

func printEffectiveness(out io.Writer, r effectiveness.Report) error {
	if len(r.Rows) == 0 {
		_, err := fmt.Fprintln(out, "nothing proposed in that period")
		return err
	}
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "TOOL\tAGENT VERSION\tPROPOSED\tSCHEMA\tDENIED\tSHADOW\tAPPROVALS req/ok/no/exp\tOVERTURN\tP50 TO APPROVE\tDUPLICATES\tUNKNOWN open/resolved\tCOMPENSATED")
	for _, row := range r.Rows {
		denied, rules := 0, make([]string, 0, len(row.Denials))
		for rule, n := range row.Denials {
			denied += n
			rules = append(rules, fmt.Sprintf("%s %d", rule, n))
		}
		sort.Strings(rules)
		a := row.Approvals
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%d\t%d/%d/%d/%d\t%.0f%%\t%s\t%d\t%d/%d\t%d\n",
			row.Tool, cmp.Or(row.AgentVersion, "-"), row.Proposals, row.SchemaRejections, denied, row.Shadowed,
			a.Requested, a.Approved, a.Rejected, a.Expired, 100*a.OverturnRate,
			time.Duration(a.P50SecondsToApproval*float64(time.Second)).Round(time.Second),
			row.DuplicatesSuppressed, row.Unknown.Open, row.Unknown.ResolvedByLookup, row.Compensations)
		if len(rules) > 0 {
			fmt.Fprintf(w, "\t\tdenied by: %s\n", strings.Join(rules, ", "))
		}
	}
	return w.Flush()
}
