package sim_test

import (
	"context"
	"flag"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/countersign/countersign/tests/sim"
)

var (
	seeds = flag.Int("seeds", 40, "how many seeds TestSimulate runs, from -seed on")
	seed  = flag.Uint64("seed", 0, "the first seed TestSimulate runs (0: a fresh random one, printed)")
)

// TestSimulate runs -seeds seeds of the designed system and fails on
// every broken invariant, naming the seed and how to replay it.
func TestSimulate(t *testing.T) {
	first := *seed
	if first == 0 {
		first = rand.Uint64() >> 1
	}
	t.Logf("seeds %d to %d (-seed %d -seeds %d)", first, first+uint64(*seeds)-1, first, *seeds)
	sum, err := sim.RunSeeds(context.Background(), first, *seeds, sim.Options{Dir: t.TempDir(), KeepTrace: *seeds == 1}, func(r sim.Result) {
		if *seeds == 1 {
			t.Logf("trace:\n%s", strings.Join(r.TraceLines, "\n"))
		}
		t.Logf("seed %d: trace %s, %d lines, %d restarts, %d violations", r.Seed, r.Trace, r.Lines, r.Restarts, len(r.Found))
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range sum.Failed {
		t.Errorf("seed %d broke %d invariants (replay: %s):\n  %s", r.Seed, len(r.Found), r.Replay, strings.Join(violations(r), "\n  "))
	}
	if len(sum.Failed) > 0 {
		r := sum.Failed[0]
		s, err := sim.Shrink(context.Background(), r.Seed, sim.Options{Dir: t.TempDir()}, r.Found[0].Invariant)
		if err != nil {
			t.Fatalf("shrink seed %d: %v", r.Seed, err)
		}
		t.Logf("seed %d shrunk to %d of %d events that still break %s:\n%s", r.Seed, len(s.Kept), s.Of, s.Invariant, strings.Join(s.Trace, "\n"))
	}
	t.Logf("%d seeds in %s: %.1f seeds/s", sum.Seeds, sum.Took.Round(1e6), sum.PerSec)
}

func violations(r sim.Result) []string {
	var out []string
	for _, v := range r.Found {
		out = append(out, v.String())
	}
	return out
}

// TestSameSeedSameTrace runs seeds twice, in another order of workers,
// and wants the same trace from each; another seed gives another trace.
func TestSameSeedSameTrace(t *testing.T) {
	const n = 8
	first := rand.Uint64() >> 1
	t.Logf("seeds %d to %d", first, first+n-1)
	a, err := sim.RunSeeds(context.Background(), first, n, sim.Options{Dir: t.TempDir(), Workers: 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := sim.RunSeeds(context.Background(), first, n, sim.Options{Dir: t.TempDir(), Workers: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]uint64{}
	for i := range n {
		ra, rb := a.Results[i], b.Results[i]
		if ra.Trace != rb.Trace || ra.Lines != rb.Lines {
			t.Errorf("seed %d: trace %s (%d lines), run again %s (%d lines)", ra.Seed, ra.Trace, ra.Lines, rb.Trace, rb.Lines)
		}
		if s, ok := seen[ra.Trace]; ok {
			t.Errorf("seeds %d and %d gave the same trace %s", s, ra.Seed, ra.Trace)
		}
		seen[ra.Trace] = ra.Seed
	}
}
