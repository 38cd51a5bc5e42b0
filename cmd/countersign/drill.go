package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/countersign/countersign/cmd/scenario/drill"
)

func newDrillCmd() *cobra.Command {
	var (
		seed   uint64
		asJSON bool
		data   string
	)
	cmd := &cobra.Command{
		Use:   "drill --seed N [--json]",
		Short: "Run the incident drill: a policy release removes the approval step, and what catches, contains and repairs it",
		Long: `Run three simulated hours of support tickets through the whole system on
loopback (engine, store, OPA policy, actor credentials, ledger and order
system) on a simulated clock: nothing sleeps, so it takes seconds.

One hour in, bundle p2 (refund limits written in dollars where the engine
reads cents) is released by break-glass. The monitor checks the records
every 5 minutes; 10 minutes after its first alert the refund tool is
switched off and the credential epoch raised; the fix p3 follows 30
minutes after the release and the tool is switched on 5 minutes later.
Then reconciliation selects the refunds that ran above the auto limit
without an approval, a lead ratifies or reverses each, and reconciliation
runs again.

It prints the gate's verdict on the bundles, the timeline, the paused
workflows, the refund steps per policy revision, the worklist and its
remediation, the reconciliation afterwards, the evidence since the fix and
the invariants. The same seed prints the same bytes. Progress goes to
stderr.

Exit status 0 when the invariants hold, 1 when the drill could not run or
an invariant broke.`,
		Example: `  countersign drill --seed 7
  countersign drill --seed 7 --json | jq .policies`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := drill.Run(cmd.Context(), drill.Options{Seed: seed, DataDir: data, Progress: cmd.ErrOrStderr()})
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				err = printJSON(out, r)
			} else {
				err = r.WriteText(out)
			}
			if err != nil {
				return err
			}
			if !r.Invariants.Hold() {
				return &exitError{code: 1, err: fmt.Errorf("seed %d: an invariant broke: %+v", seed, r.Invariants)}
			}
			return nil
		},
	}
	cmd.Flags().Uint64Var(&seed, "seed", 1, "seed of the traffic and of the leads' choices")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the figures as JSON")
	cmd.Flags().StringVar(&data, "data", "", "keep the stack's files in this empty directory (default: a temporary one, removed)")
	return cmd
}
