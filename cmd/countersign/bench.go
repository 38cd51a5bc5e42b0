package main

import (
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/spf13/cobra"

	"github.com/countersign/countersign/cmd/scenario/bench"
)

func newBenchCmd() *cobra.Command {
	var (
		o          bench.Options
		asJSON     bool
		cpuProfile string
	)
	cmd := &cobra.Command{
		Use:   "bench [--agents 1,64] [--duration 10s] [--baseline] [--sidecar URL --data DIR] [--store postgres://... [--sidecars 1,2,3] [--store-latency 1ms]] [--json]",
		Short: "Measure governed refunds through the real HTTP API: throughput, latency, fsyncs and CPU per step",
		Long: `Start the dev stack in this process on loopback (or drive a running
serve --dev with --sidecar and its --data directory), and for each agent
count run that many agents for the duration: each creates a workflow and
proposes a 1-cent refund in it, again and again. Every agent has orders of
its own, so every refund is allowed without an approval.

It prints done steps per second, the p50 and p99 of the proposal and of
workflow creation plus proposal, bbolt commits and fsyncs per step (2 per
commit, counted from each file's transaction id) and CPU seconds per
1,000 steps; the last two only in process. Steps that were not done are
listed by what happened to them.

--baseline then runs, on the same ledger, the glue a team would write
instead: an OPA server in this process with the same bundle; per call an
order lookup in the order system, one REST decision, then a direct
ledger call with a minted actor token and an idempotency key; and prints
countersign's done/s over the glue's.

--store postgres://... puts the sidecars' store on PostgreSQL instead: for
each count of --sidecars it creates a fresh database on that server (the
URL's role needs CREATEDB), starts that many sidecars in this process on
it, sharing one ledger, order system and identity provider, spreads the
agents over them round-robin, runs every agent count, and drops the
database. Commits are summed over the sidecars' handles and their
serialization retries printed; fsyncs do not apply (the server flushes
its WAL) and print n/a. The sidecars reach PostgreSQL through a proxy in
this process that counts the round trips and statements per governed
call; --store-latency adds that round trip to each (half each way), as a
database a network hop away would: 1ms is a nearby cloud database.

This is how the README's "Measured" table is made. Progress goes to
stderr.`,
		Example: `  countersign bench --agents 1,64 --duration 10s --baseline
  countersign serve --dev --data /tmp/cs &   # then, against it:
  countersign bench --store postgres://postgres@127.0.0.1:5432/postgres --sidecars 1,2,3 --agents 1,64
  countersign bench --store postgres://postgres@127.0.0.1:5432/postgres --sidecars 1,2,4 --agents 64 --store-latency 1ms
  countersign bench --sidecar "$(jq -r .sidecar /tmp/cs/dev-endpoints.json)" --data /tmp/cs --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Progress = cmd.ErrOrStderr()
			if cpuProfile != "" {
				stop, err := profileCPU(cpuProfile)
				if err != nil {
					return err
				}
				defer stop()
			}
			r, err := bench.Run(cmd.Context(), o)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), r)
			}
			return r.WriteText(cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.IntSliceVar(&o.Agents, "agents", bench.DefaultAgents(), "agent counts, one run each")
	f.DurationVar(&o.Duration, "duration", bench.DefaultDuration, "how long each run starts new steps")
	f.BoolVar(&o.TwoRequests, "two-requests", false, "create each workflow with POST /v1/workflows before proposing, as before the proposal could open it (default: one request per call)")
	f.BoolVar(&o.Baseline, "baseline", false, "also run the glue (order lookup, OPA server over REST, direct ledger call) and print the ratio")
	f.StringVar(&o.Sidecar, "sidecar", "", "drive this running serve --dev (loopback URL) instead of an in-process stack")
	f.StringVar(&o.DataDir, "data", "", "with --sidecar: its data directory (dev-tokens.json); without: an empty directory for the stack's files (default: a temporary one, removed)")
	f.StringVar(&o.Store, "store", "", "a postgres:// URL: run the sidecars on PostgreSQL, a fresh database per sidecar count on that server")
	f.IntSliceVar(&o.Sidecars, "sidecars", nil, "with --store: sidecar counts, one fleet each (default 1)")
	f.DurationVar(&o.StoreLatency, "store-latency", 0, "with --store: the round trip added between the sidecars and PostgreSQL, half each way (0 to 100ms)")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run (stack and agents, in process) to this file, for go tool pprof")
	return cmd
}

// profileCPU starts a CPU profile into path; stop ends it and closes the file.
func profileCPU(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
