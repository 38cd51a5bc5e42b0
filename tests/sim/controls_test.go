package sim_test

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/cmd/scenario/demo"
	"github.com/countersign/countersign/tests/sim"
)

var slowControls = flag.Bool("slow-controls", false, "TestRemovedControlsAreFound also searches for the controls whose first failing seed lies far out (resolve_by_reference: seed 872)")

// TestRemovedControlsAreFound earns the harness its trust: with a
// control removed, some seed within the first 1,000 breaks the invariant
// that control protects. Each row prints the first seed that does.
func TestRemovedControlsAreFound(t *testing.T) {
	if testing.Short() {
		t.Skip("searches up to 1,000 seeds per control")
	}
	type row struct {
		removed []demo.Control
		breaks  sim.Invariant
	}
	rows := []row{
		{[]demo.Control{demo.IdempotencyKeys}, sim.InvLedger},
		{[]demo.Control{demo.EffectFence}, sim.InvReconciles},
		{[]demo.Control{demo.Cumulative}, sim.InvApproval},
		{[]demo.Control{demo.Cumulative}, sim.InvPaid},
		{[]demo.Control{demo.ReshipHistory}, sim.InvReshipLimit},
		{[]demo.Control{demo.CheckSwitchAtExecution}, sim.InvSwitch},
		{[]demo.Control{demo.WriteAhead, demo.ReferenceKeys}, sim.InvShipment},
		{[]demo.Control{demo.RunDedupe}, sim.InvLedger},
		{[]demo.Control{demo.BindApproval}, sim.InvApproval},
		{[]demo.Control{demo.StrictSchema}, sim.InvApproval},
		{[]demo.Control{demo.EffectFence}, sim.InvLedger},
		{[]demo.Control{demo.LeaseFencing}, sim.InvLedger},
		{[]demo.Control{demo.TwoPersonLoosening}, sim.InvApproval},
		{[]demo.Control{demo.ApprovalRoleFloor}, sim.InvApprover},
		{[]demo.Control{demo.SingleUseTokens, demo.ReferenceKeys}, sim.InvShipment},
		{[]demo.Control{demo.DownstreamCeiling}, sim.InvCeiling},
	}
	if *slowControls {
		rows = append(rows, row{[]demo.Control{demo.ResolveByReference, demo.ReferenceKeys}, sim.InvShipment})
	}
	// The seeds run with a set of controls removed are kept, so that a
	// second row removing the same ones reads them before running more.
	ran := map[string][]sim.Result{}
	for _, c := range rows {
		t.Run(string(c.removed[0])+"/"+string(c.breaks), func(t *testing.T) {
			controls := demo.Without(c.removed...)
			key := fmt.Sprint(c.removed)
			start := time.Now()
			r, found := firstBreaking(ran[key], c.breaks)
			if !found {
				var err error
				first := uint64(len(ran[key])) + 1
				r, found, err = sim.Search(context.Background(), first, 1000-len(ran[key]), sim.Options{Controls: &controls, Dir: t.TempDir()},
					func(r sim.Result) bool { ran[key] = append(ran[key], r); return r.Broke(c.breaks) })
				if err != nil {
					t.Fatal(err)
				}
			}
			if !found {
				t.Fatalf("without %v no seed of 1 to 1,000 broke %s", c.removed, c.breaks)
			}
			t.Logf("without %v: seed %d breaks %s first (%s): %s", c.removed, r.Seed, c.breaks,
				time.Since(start).Round(time.Millisecond), firstOf(r, c.breaks))
		})
	}
}

// firstBreaking is the first of results that broke inv.
func firstBreaking(results []sim.Result, inv sim.Invariant) (sim.Result, bool) {
	for _, r := range results {
		if r.Broke(inv) {
			return r, true
		}
	}
	return sim.Result{}, false
}

func firstOf(r sim.Result, inv sim.Invariant) string {
	for _, v := range r.Found {
		if v.Invariant == inv {
			return v.Detail
		}
	}
	return ""
}

// TestShrinkKeepsTheFailure shrinks a seed that breaks an invariant with
// the idempotency keys removed: fewer events, the same invariant broken.
func TestShrinkKeepsTheFailure(t *testing.T) {
	controls := demo.Without(demo.IdempotencyKeys)
	o := sim.Options{Controls: &controls, Dir: t.TempDir()}
	r, found, err := sim.Search(context.Background(), 1, 50, o, func(r sim.Result) bool { return r.Broke(sim.InvLedger) })
	if err != nil || !found {
		t.Fatalf("no seed of 50 broke %s without idempotency keys (%v)", sim.InvLedger, err)
	}
	for _, want := range []string{fmt.Sprintf("go test ./tests/sim -run TestSimulate -seed %d", r.Seed), fmt.Sprintf("countersign simulate --seed %d", r.Seed)} {
		if !strings.Contains(r.Replay, want) {
			t.Errorf("seed %d's replay %q does not say %q", r.Seed, r.Replay, want)
		}
	}
	s, err := sim.Shrink(context.Background(), r.Seed, o, sim.InvLedger)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Kept) == 0 || len(s.Kept) >= s.Of {
		t.Fatalf("seed %d shrank from %d events to %d", r.Seed, s.Of, len(s.Kept))
	}
	t.Logf("seed %d: %d of %d events still break %s (%d runs):\n%s", r.Seed, len(s.Kept), s.Of, s.Invariant, s.Runs, strings.Join(s.Trace, "\n"))
}
