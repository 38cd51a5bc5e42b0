package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/countersign/countersign/cmd/scenario/demo"
)

func newDemoCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run every proof on loopback in a temporary directory and print what happened",
		Long: `Start the whole system (sidecar, ledger, order system, dev identity
provider, store and policy) on loopback ports in a temporary directory, as
many times as the scenarios need, and print what a real run did, in order:

  1 policy decisions   2 approval authority   3 binding   4 the gate on p1 and p2
  the crash matrix     reconciliation         the control-removal matrix

Every count is read from the ledger and the order system, not from
countersign's own records. Progress goes to stderr, one line per section;
the temporary directory is removed at the end. The command fails when a
section cannot run or when a removed control goes undetected.`,
		Example: `  countersign demo
  countersign demo --json | jq .controls.rows`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := os.MkdirTemp("", "countersign-demo-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			r, err := demo.Run(cmd.Context(), demo.Options{Dir: dir, Progress: cmd.ErrOrStderr()})
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				if err := printJSON(out, r); err != nil {
					return err
				}
			} else if err := r.WriteText(out); err != nil {
				return err
			}
			if p := r.Controls.Problems(); len(p) > 0 {
				return &exitError{code: 1, err: fmt.Errorf("the control-removal matrix has %d problem(s); the first: %s", len(p), p[0])}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON (keys policy_decisions, approval_authority, binding, gate, crash_matrix, reconciliation, controls)")
	return cmd
}
