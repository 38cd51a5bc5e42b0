package drill_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/cmd/devstack"
	"github.com/countersign/countersign/cmd/scenario/drill"
	"github.com/countersign/countersign/executor/audit"
	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/fixture"
	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/sim/ledger"
	"github.com/countersign/countersign/executor/store"
)

// render runs the drill for seed and returns its text and its JSON.
func render(t *testing.T, seed uint64, inspect func(context.Context, *devstack.Stack, *drill.Report) error) (text, js []byte) {
	t.Helper()
	r, err := drill.Run(t.Context(), drill.Options{Seed: seed, DataDir: t.TempDir(), Inspect: inspect})
	if err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	var tb, jb bytes.Buffer
	if err := r.WriteText(&tb); err != nil {
		t.Fatal(err)
	}
	if err := json.NewEncoder(&jb).Encode(r); err != nil {
		t.Fatal(err)
	}
	return tb.Bytes(), jb.Bytes()
}

// firstDifference names the first line where a and b differ.
func firstDifference(a, b []byte) string {
	la, lb := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := range min(len(la), len(lb)) {
		if la[i] != lb[i] {
			return fmt.Sprintf("line %d:\n  first:  %q\n  second: %q", i+1, la[i], lb[i])
		}
	}
	return fmt.Sprintf("lengths %d and %d lines", len(la), len(lb))
}

func TestSameSeedSameBytes(t *testing.T) {
	t.Parallel()
	text1, js1 := render(t, 7, nil)
	text2, js2 := render(t, 7, nil)
	if !bytes.Equal(text1, text2) {
		t.Errorf("two runs of seed 7 print different text: %s", firstDifference(text1, text2))
	}
	if !bytes.Equal(js1, js2) {
		t.Errorf("two runs of seed 7 print different JSON: %s", firstDifference(js1, js2))
	}
	for _, leak := range []string{"127.0.0.1", "localhost", time.Now().UTC().Format("2006-01-02")} {
		if bytes.Contains(text1, []byte(leak)) || bytes.Contains(js1, []byte(leak)) {
			t.Errorf("the output holds %q, which differs between machines or days", leak)
		}
	}
}

func TestOtherSeedOtherTraffic(t *testing.T) {
	t.Parallel()
	a, _ := render(t, 7, nil)
	b, _ := render(t, 8, nil)
	if bytes.Equal(a, b) {
		t.Fatal("seeds 7 and 8 print the same report: the seed does not reach the traffic")
	}
}

// TestInvariantsEverySeed runs seeds 1 to 20 and checks the invariants
// against the systems of record and the store directly, not against the
// report's own figures. With -short it runs the first three.
func TestInvariantsEverySeed(t *testing.T) {
	last := uint64(20)
	if testing.Short() {
		last = 3
	}
	for seed := uint64(1); seed <= last; seed++ {
		t.Run(fmt.Sprintf("seed-%02d", seed), func(t *testing.T) {
			t.Parallel()
			render(t, seed, func(ctx context.Context, st *devstack.Stack, r *drill.Report) error {
				checkSeed(t, ctx, st, r)
				return nil
			})
		})
	}
}

// checkSeed checks one finished drill.
func checkSeed(t *testing.T, ctx context.Context, st *devstack.Stack, r *drill.Report) {
	t.Helper()
	at := map[string]drill.Event{}
	for _, e := range r.Timeline {
		at[e.Name] = e
	}
	for _, name := range []string{drill.EventDeploy, drill.EventAlert, drill.EventContain, drill.EventFix, drill.EventReenable} {
		if _, ok := at[name]; !ok {
			t.Fatalf("the timeline has no %s: %+v", name, r.Timeline)
		}
	}
	contained, reenabled := at[drill.EventContain].At, at[drill.EventReenable].At
	if got := at[drill.EventContain].At.Sub(at[drill.EventAlert].At); got != 10*time.Minute {
		t.Errorf("containment came %v after the alert, want 10m", got)
	}
	if fix := at[drill.EventFix]; fix.Minute < 30 || fix.At.Before(contained) {
		t.Errorf("the fix came at %+.1f, before +30 or before containment", fix.Minute)
	}

	entries, err := st.Ledger.Entries()
	if err != nil {
		t.Fatal(err)
	}
	steps := map[string]store.Step{} // by idempotency key
	var approvals []store.Approval   // every approval ever requested or given
	err = st.Store.View(func(tx *store.Tx) error {
		if err := tx.AllSteps(func(s store.Step) error {
			if s.Key != "" {
				steps[s.Key] = s
			}
			return nil
		}); err != nil {
			return err
		}
		approvals, err = tx.Approvals(nil)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	approvedBefore := func(s store.Step) bool {
		for _, a := range approvals {
			if a.Workflow == s.Workflow && a.N == s.N && !a.Retroactive && a.Status == store.ApprovalUsed &&
				a.CallHash == engine.Binding(s.Workflow, s.Tool, s.Args) {
				return true
			}
		}
		return false
	}

	var reversed money.Cents
	for _, e := range entries {
		switch e.Kind {
		case ledger.KindRefund:
			// The ledger never accepts a refund above the rep's ceiling.
			p, ok := fixture.PersonByID(e.By)
			if !ok || e.Amount > int64(p.RefundCeiling) {
				t.Errorf("ledger entry %s: refund of %s by %q, above the ceiling of the rep", e.ID, money.Cents(e.Amount), e.By)
			}
			// Nothing is refunded while the tool is switched off.
			if !e.At.Before(contained) && e.At.Before(reenabled) {
				t.Errorf("ledger entry %s: a refund at %s, while issue_refund was switched off", e.ID, e.At)
			}
			// No violating refund after containment.
			if e.At.Before(contained) || e.Amount <= 5000 {
				continue
			}
			if s, ok := steps[e.Key]; !ok || !approvedBefore(s) {
				t.Errorf("ledger entry %s: %s refunded at %s, after containment, without a used approval", e.ID, money.Cents(e.Amount), e.At)
			}
		case ledger.KindReversal:
			reversed += money.Cents(e.Amount)
		}
	}
	if reversed != r.Remediation.ToRecover {
		t.Errorf("the ledger's reversals total %s, the report says %s to recover", reversed, r.Remediation.ToRecover)
	}

	// Reconciliation after remediation, run once more here: nothing unexplained.
	rep, err := st.Reconcile.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Unexplained != 0 || r.After.Unexplained != 0 {
		t.Errorf("reconciliation after remediation: %d unexplained (report: %d): %+v", rep.Unexplained, r.After.Unexplained, rep.Findings)
	}
	if !r.Invariants.Hold() {
		t.Errorf("the report says an invariant broke: %+v", r.Invariants)
	}

	// The worklist is every violation of the table, and each was settled.
	var violations int
	for _, row := range r.Policies {
		violations += row.Violations
		if row.Revision != "p2" && row.Violations != 0 {
			t.Errorf("%s let %d refund(s) run above the auto limit without an approval", row.Revision, row.Violations)
		}
	}
	if r.Worklist.Count != violations || r.Remediation.Ratified+r.Remediation.Reversed != violations {
		t.Errorf("table: %d violation(s); worklist %d; remediated %d+%d", violations, r.Worklist.Count, r.Remediation.Ratified, r.Remediation.Reversed)
	}
	if r.SinceFix.Violations != 0 {
		t.Errorf("%d violation(s) under the fix", r.SinceFix.Violations)
	}

	// The gate rejects the p2 as shipped with exactly its three cases.
	for _, v := range r.Gate {
		want := 0
		if v.Revision == "p2" {
			want = 3
		}
		if len(v.Failures) != want || v.Passed != (want == 0) {
			t.Errorf("gate on %s: %d failing case(s), passed %v; want %d", v.Revision, len(v.Failures), v.Passed, want)
		}
	}

	// The audit chain of the whole drill verifies.
	ar, err := audit.Verify(st.Store)
	if err != nil {
		t.Fatal(err)
	}
	if !ar.OK {
		t.Errorf("the audit chain is broken: %+v", ar)
	}
}
