package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/countersign/countersign/executor/reconcile"
)

func newShadowCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "shadow",
		Short: "Evidence from a shadow period (tools in mode shadow)",
		Args:  cobra.NoArgs,
	}
	var (
		data   string
		asJSON bool
	)
	report := &cobra.Command{
		Use:   "report --data DIR [--json]",
		Short: "Compare shadowed proposals with what people did in the ledger and the order system",
		Long: `Read the shadowed proposals from DIR/sidecar.db of a stopped sidecar and
set them, order by order, beside the external ledger entries and shipments
(made by people, outside countersign) since the first of them: how often
the agent and the people agreed, the orders the agent would have paid (or
reshipped) when nobody did, and the reverse. Nothing is written.
A running sidecar answers the same question: GET /v1/shadow/report.`,
		Example: `  countersign shadow report --data /tmp/cs
  countersign shadow report --data /tmp/cs --json | jq .would_have_paid_nothing_paid`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if data == "" {
				return errors.New("--data DIR is required: the directory countersign serve --dev keeps its state in")
			}
			job, closeAll, err := offlineJob(data)
			if err != nil {
				return err
			}
			defer closeAll()
			r, err := job.Shadow(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), r)
			}
			return writeShadow(cmd.OutOrStdout(), r)
		},
	}
	report.Flags().StringVar(&data, "data", "", "data directory of a stopped countersign serve --dev")
	report.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	cmd.AddCommand(report)
	return cmd
}

// writeShadow prints the report for a person.
func writeShadow(w io.Writer, r reconcile.ShadowReport) error {
	if r.Proposals == 0 {
		_, err := fmt.Fprintln(w, "no shadowed proposals: put a tool in shadow (PUT /v1/modes/{tool}) and let the agent work")
		return err
	}
	fmt.Fprintf(w, "shadow period since %s: %d proposals over %d orders; agreement on %d of %d\n",
		r.Since.UTC().Format("2006-01-02T15:04:05Z"), r.Proposals, r.Orders, r.Agreement, r.Orders)
	for _, part := range []struct {
		title string
		cases []reconcile.ShadowCase
	}{{"would have paid, nothing was paid", r.WouldHaveActed}, {"paid by people, the agent would not have", r.PeopleActed}} {
		fmt.Fprintf(w, "%s: %d\n", part.title, len(part.cases))
		for _, c := range part.cases {
			fmt.Fprintf(w, "  %s %s: proposed %d cents in %d proposals; paid %d cents, shipped %d, by %v\n",
				c.Order, c.Tool, c.Proposed, len(c.Proposals), c.Paid, c.Shipped, c.By)
		}
	}
	return nil
}
