package store_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

var t0 = time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)

func refund(wf string, n int, order string, amount money.Cents, status store.StepStatus, at time.Time) store.Step {
	args := tool.Args{Order: order, Amount: amount}
	return store.Step{Workflow: wf, N: n, Tool: tool.IssueRefund, Args: args, Call: tool.CallHash(tool.IssueRefund, args),
		Status: status, ReservedAt: at, Created: at}
}

func mustUpdate(t testing.TB, db *store.DB, fn func(*store.Tx) error) {
	t.Helper()
	if err := db.Update(fn); err != nil {
		t.Fatal(err)
	}
}

func TestSpendingIndexesFollowStatus(t *testing.T) {
	eachBackend(t, func(t *testing.T, open opener) {
		db := open(t)
		mustUpdate(t, db, func(tx *store.Tx) error {
			for _, w := range []store.Workflow{{ID: "W1", User: "rep-ana"}, {ID: "W2", User: "rep-ben"}} {
				if err := tx.CreateWorkflow(w); err != nil {
					return err
				}
			}
			steps := []store.Step{
				refund("W1", 1, "O-1001", 3000, store.StepDone, t0),
				refund("W1", 2, "O-1002", 4900, store.StepStarted, t0.Add(30*time.Minute)),
				refund("W1", 3, "O-1002", 100, store.StepPending, t0.Add(40*time.Minute)),
				refund("W2", 1, "O-1003", 2000, store.StepUnknown, t0.Add(50*time.Minute)),
			}
			for _, s := range steps {
				if err := tx.PutStep(s); err != nil {
					return err
				}
			}
			return nil
		})
		check := func(name string, got, want money.Cents) {
			t.Helper()
			if got != want {
				t.Errorf("%s = %v, want %v", name, got, want)
			}
		}
		db.View(func(tx *store.Tx) error {
			check("O-1002 spent", tx.OrderSpent("O-1002"), 4900)
			check("rep-ana since t0", tx.RepSpentSince("rep-ana", t0), 7900)
			check("rep-ana since t0+1m", tx.RepSpentSince("rep-ana", t0.Add(time.Minute)), 4900)
			check("rep-ben since t0", tx.RepSpentSince("rep-ben", t0), 2000)
			check("agent since t0", tx.AgentSpentSince(t0), 9900)
			check("agent since t0+45m", tx.AgentSpentSince(t0.Add(45*time.Minute)), 2000)
			return nil
		})
		// A refund the ledger refused stops counting; a pending one starts.
		mustUpdate(t, db, func(tx *store.Tx) error {
			s, err := tx.Step("W1", 2)
			if err != nil {
				return err
			}
			s.Status = store.StepDenied
			if err := tx.PutStep(s); err != nil {
				return err
			}
			s3, _ := tx.Step("W1", 3)
			s3.Status = store.StepStarted
			return tx.PutStep(s3)
		})
		db.View(func(tx *store.Tx) error {
			check("O-1002 spent after", tx.OrderSpent("O-1002"), 100)
			check("rep-ana after", tx.RepSpentSince("rep-ana", t0), 3100)
			check("agent after", tx.AgentSpentSince(t0), 5100)
			return nil
		})
	})
}

func TestStartedRefundCannotChange(t *testing.T) {
	eachBackend(t, func(t *testing.T, open opener) {
		db := open(t)
		err := db.Update(func(tx *store.Tx) error {
			tx.CreateWorkflow(store.Workflow{ID: "W1", User: "rep-ana"})
			s := refund("W1", 1, "O-1001", 3000, store.StepStarted, t0)
			if err := tx.PutStep(s); err != nil {
				return err
			}
			s.Args.Amount = 30000
			return tx.PutStep(s)
		})
		if err == nil {
			t.Fatal("changing the amount of a started refund was accepted")
		}
	})
}

func TestStepByCall(t *testing.T) {
	eachBackend(t, func(t *testing.T, open opener) {
		db := open(t)
		mustUpdate(t, db, func(tx *store.Tx) error {
			tx.CreateWorkflow(store.Workflow{ID: "W1", User: "rep-ana"})
			first := refund("W1", 1, "O-1001", 3000, store.StepDone, t0)
			dup := first
			dup.N, dup.Status, dup.DuplicateOf = 2, store.StepSuppressed, 1
			if err := tx.PutStep(first); err != nil {
				return err
			}
			return tx.PutStep(dup)
		})
		db.View(func(tx *store.Tx) error {
			s, err := tx.StepByCall("W1", tool.CallHash(tool.IssueRefund, tool.Args{Order: "O-1001", Amount: 3000}))
			if err != nil || s.N != 1 {
				t.Errorf("StepByCall = %d, %v; want step 1", s.N, err)
			}
			if _, err := tx.StepByCall("W2", s.Call); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("other workflow: err = %v", err)
			}
			return nil
		})
		// Amending step 1 frees its old call for a later step.
		mustUpdate(t, db, func(tx *store.Tx) error {
			s, _ := tx.Step("W1", 1)
			s.Status = store.StepPending
			s.Args.Amount = 4000
			s.Call = tool.CallHash(tool.IssueRefund, s.Args)
			return tx.PutStep(s)
		})
		db.View(func(tx *store.Tx) error {
			if _, err := tx.StepByCall("W1", tool.CallHash(tool.IssueRefund, tool.Args{Order: "O-1001", Amount: 3000})); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("old call still indexed: %v", err)
			}
			return nil
		})
	})
}

func TestBundlesSupersede(t *testing.T) {
	eachBackend(t, func(t *testing.T, open opener) {
		db := open(t)
		db.View(func(tx *store.Tx) error {
			if d := tx.ActiveDigest(); d != "" {
				t.Errorf("a fresh store's active digest is %q, want none", d)
			}
			return nil
		})
		mustUpdate(t, db, func(tx *store.Tx) error {
			for _, r := range []store.BundleRecord{
				{Revision: "p1", Digest: "d1", Status: store.BundleActive, By: "ops-ida", At: t0},
				{Revision: "p2", Digest: "d2", Status: store.BundleRejected, By: "ops-ida", At: t0,
					Failures: []store.BundleFailure{{Case: "c", Amount: 5100, Expected: "REQUIRE_APPROVAL", Got: "ALLOW"}}},
				{Revision: "p3", Digest: "d3", Status: store.BundleActive, By: "ops-ida", At: t0},
			} {
				if _, err := tx.AppendBundle(r, []byte("bytes-"+r.Digest)); err != nil {
					return err
				}
			}
			return nil
		})
		db.View(func(tx *store.Tx) error {
			all, _ := tx.Bundles()
			var got []string
			for _, r := range all {
				got = append(got, fmt.Sprintf("%s:%s", r.Revision, r.Status))
			}
			if fmt.Sprint(got) != "[p1:superseded p2:rejected p3:active]" {
				t.Errorf("history = %v", got)
			}
			rec, blob, err := tx.ActiveBundle()
			if err != nil || rec.Revision != "p3" || string(blob) != "bytes-d3" {
				t.Errorf("active = %v %q %v", rec.Revision, blob, err)
			}
			if d := tx.ActiveDigest(); d != "d3" {
				t.Errorf("active digest %q, want d3 (a rejected bundle does not count)", d)
			}
			return nil
		})
	})
}

func TestDecisionsByWorkflow(t *testing.T) {
	eachBackend(t, func(t *testing.T, open opener) {
		db := open(t)
		mustUpdate(t, db, func(tx *store.Tx) error {
			for i, wf := range []string{"W1", "W10", "W1", "W2"} {
				if _, err := tx.AppendDecision(store.Decision{Workflow: wf, N: i, Rule: wf}); err != nil {
					return err
				}
			}
			return nil
		})
		db.View(func(tx *store.Tx) error {
			w1, _ := tx.Decisions("W1")
			all, _ := tx.Decisions("")
			if len(w1) != 2 || w1[0].N != 0 || w1[1].N != 2 || len(all) != 4 {
				t.Errorf("W1 = %+v, all = %d", w1, len(all))
			}
			return nil
		})
	})
}

func TestSecondOpenIsLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := store.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, err = store.Open(path, store.Options{Timeout: 50 * time.Millisecond})
	if !errors.Is(err, store.ErrLocked) {
		t.Fatalf("second open: %v, want ErrLocked", err)
	}
}

func TestApprovalsInCreationOrder(t *testing.T) {
	eachBackend(t, func(t *testing.T, open opener) {
		db := open(t)
		mustUpdate(t, db, func(tx *store.Tx) error {
			for i := 0; i < 11; i++ {
				id, err := tx.NewApprovalID()
				if err != nil {
					return err
				}
				if err := tx.PutApproval(store.Approval{ID: id, Status: store.ApprovalPending}); err != nil {
					return err
				}
			}
			return nil
		})
		db.View(func(tx *store.Tx) error {
			all, _ := tx.Approvals(nil)
			if len(all) != 11 || all[1].ID != "AP-2" || all[10].ID != "AP-11" {
				t.Errorf("order: %v %v", all[1].ID, all[10].ID)
			}
			return nil
		})
	})
}

// BenchmarkTotalsFlat shows that reading a decision's totals (refunds in
// the windows, and the order's reships) does not grow with history outside
// the window: run with -benchtime and compare sizes.
func BenchmarkTotalsFlat(b *testing.B) {
	for _, history := range []int{100, 10000} {
		b.Run(fmt.Sprintf("history=%d", history), func(b *testing.B) {
			db, err := store.Open(filepath.Join(b.TempDir(), "s.db"), store.Options{NoSync: true})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			db.Update(func(tx *store.Tx) error {
				tx.CreateWorkflow(store.Workflow{ID: "W", User: "rep-ana"})
				tx.CreateWorkflow(store.Workflow{ID: "R", User: "rep-ana"})
				for i := 1; i <= history; i++ {
					// All but the last 20 lie outside the rolling day.
					at := t0.Add(-48 * time.Hour).Add(time.Duration(i) * time.Second)
					if i > history-20 {
						at = t0.Add(-time.Duration(i%20) * time.Minute)
					}
					if err := tx.PutStep(refund("W", i, fmt.Sprintf("O-%d", i), 100, store.StepDone, at)); err != nil {
						b.Fatal(err)
					}
					// As many reships, spread over fifty orders.
					if err := tx.PutStep(reship("R", i, fmt.Sprintf("O-%d", i%50), store.StepDone)); err != nil {
						b.Fatal(err)
					}
				}
				return nil
			})
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				db.View(func(tx *store.Tx) error {
					_ = tx.OrderSpent("O-5")
					_ = tx.RepSpentSince("rep-ana", t0.Add(-24*time.Hour))
					_ = tx.AgentSpentSince(t0.Add(-time.Hour))
					_ = tx.OrderReships("O-5")
					return nil
				})
			}
		})
	}
}

func TestDecisionsSinceReadsTheTail(t *testing.T) {
	eachBackend(t, func(t *testing.T, open opener) {
		db := open(t)
		mustUpdate(t, db, func(tx *store.Tx) error {
			for i := range 5 {
				if _, err := tx.AppendDecision(store.Decision{N: i, At: t0.Add(time.Duration(i) * time.Hour)}); err != nil {
					return err
				}
			}
			return nil
		})
		var got []int
		db.View(func(tx *store.Tx) error {
			return tx.DecisionsSince(t0.Add(3*time.Hour), func(d store.Decision) error { got = append(got, d.N); return nil })
		})
		if fmt.Sprint(got) != "[4 3]" {
			t.Fatalf("DecisionsSince = %v, want [4 3]", got)
		}
	})
}
