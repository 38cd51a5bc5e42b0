package main

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/spf13/cobra"

	"github.com/countersign/countersign/tests/sim"
)

func newSimulateCmd() *cobra.Command {
	var (
		seeds, events, workers int
		first                  uint64
		asJSON, showTrace      bool
	)
	cmd := &cobra.Command{
		Use:   "simulate [--seeds N] [--seed S] [--json] [--trace]",
		Short: "Search seeded simulated worlds (crashes, lost and late answers, 5xx, paused fleet members, failing store writes, raised epochs, bundle releases) for a broken invariant",
		Long: `Run N seeded worlds in this process, each a sidecar's engine on its own
bbolt file, or a fleet of two or three on one store under leases, with the
simulated ledger and order system behind a simulated network, one
simulated clock and a random workload of reps, leads and operators with
faults; after each, check the invariants (package tests/sim lists them). The same seed gives the same event trace, whose
hash is printed. A seed that breaks an invariant is printed with the
command that replays it; the exit status is then 1.

--seed is the first seed (default: a fresh random one, printed); --trace
prints each seed's event trace, for replaying one seed.`,
		Example: `  countersign simulate --seeds 10000
  countersign simulate --seed 4242 --trace`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if first == 0 {
				first = rand.Uint64() >> 1
			}
			if !cmd.Flags().Changed("seeds") && cmd.Flags().Changed("seed") {
				seeds = 1
			}
			out := cmd.OutOrStdout()
			if !asJSON {
				fmt.Fprintf(cmd.ErrOrStderr(), "seeds %d to %d\n", first, first+uint64(seeds)-1)
			}
			o := sim.Options{Events: events, Workers: workers, KeepTrace: showTrace}
			sum, err := sim.RunSeeds(cmd.Context(), first, seeds, o, func(r sim.Result) {
				if showTrace && !asJSON {
					fmt.Fprintf(out, "seed %d:\n%s\n", r.Seed, strings.Join(r.TraceLines, "\n"))
				}
				if showTrace || seeds == 1 {
					fmt.Fprintf(cmd.ErrOrStderr(), "seed %d: trace %s, %d lines, %d restarts\n", r.Seed, r.Trace, r.Lines, r.Restarts)
				}
			})
			if err != nil {
				return err
			}
			if asJSON {
				if err := printJSON(out, sum); err != nil {
					return err
				}
			} else {
				for _, r := range sum.Failed {
					fmt.Fprintf(out, "seed %d (trace %s) broke:\n", r.Seed, r.Trace)
					for _, v := range r.Found {
						fmt.Fprintf(out, "  %s\n", v)
					}
					fmt.Fprintf(out, "  replay: %s\n", r.Replay)
				}
				fmt.Fprintf(out, "%d seeds from %d in %s (%.1f seeds/s): %d broke an invariant\n",
					sum.Seeds, sum.First, sum.Took.Round(1e7), sum.PerSec, len(sum.Failed))
			}
			if len(sum.Failed) > 0 && !asJSON {
				r := sum.Failed[0]
				s, err := sim.Shrink(cmd.Context(), r.Seed, o, r.Found[0].Invariant)
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "seed %d shrunk to %d of %d events that still break %s:\n%s\n",
					r.Seed, len(s.Kept), s.Of, s.Invariant, strings.Join(s.Trace, "\n"))
			}
			if len(sum.Failed) > 0 {
				return &exitError{code: 1, err: errors.New("a seed broke an invariant; replay it with the command printed")}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&seeds, "seeds", 100, "how many seeds to run")
	f.Uint64Var(&first, "seed", 0, "the first seed (0: a fresh random one); alone, runs that seed only")
	f.IntVar(&events, "events", sim.DefaultEvents, "workload and fault events per seed")
	f.IntVar(&workers, "workers", 0, "seeds run at once (0: one per CPU)")
	f.BoolVar(&asJSON, "json", false, "print the summary as JSON")
	f.BoolVar(&showTrace, "trace", false, "print each seed's event trace")
	return cmd
}
