package store_test

import (
	"errors"
	"path"
	"testing"
	"time"

	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/store"
)

// facts are what a decision reads, as the accessors answer them.
type facts struct {
	stepStatus          store.StepStatus
	stepAmount          money.Cents
	stepErr             bool
	switchOn            bool
	orderSpent          money.Cents
	reships             int
	repDay, agentHour   money.Cents
	digest              string
	missingWorkflowErrs bool
}

func readFacts(tx *store.Tx, since time.Time) facts {
	var f facts
	s, err := tx.Step("W1", 1)
	f.stepStatus, f.stepAmount, f.stepErr = s.Status, s.Args.Amount, err != nil
	f.switchOn = tx.Switch("issue_refund")
	f.orderSpent, f.reships = tx.OrderSpent("O-1"), tx.OrderReships("O-1")
	f.repDay, f.agentHour = tx.RepSpentSince("rep-ana", since), tx.AgentSpentSince(since)
	f.digest = tx.ActiveDigest()
	_, err = tx.Workflow("W-none")
	f.missingWorkflowErrs = err != nil
	return f
}

func prefetchAll(tx *store.Tx, since time.Time) {
	tx.Prefetch(store.ReadStep("W1", 1), store.ReadStep("W1", 2), store.ReadWorkflow("W1"), store.ReadWorkflow("W-none"),
		store.ReadSwitch("issue_refund"), store.ReadMode("issue_refund"), store.ReadBreaker("issue_refund", "v1"),
		store.ReadActiveDigest(), store.ReadOrderSpent("O-1"), store.ReadOrderReships("O-1"),
		store.ReadRepSpent("rep-ana", since), store.ReadAgentSpent(since))
}

// What a transaction reads after Prefetch is what it reads without it,
// before its writes and after them: a step it wrote, a switch it turned,
// an order's total and the window totals its new refund added to.
func TestPrefetchReadsWhatTheAccessorsRead(t *testing.T) {
	eachBackend(t, func(t *testing.T, open opener) {
		db := open(t)
		since := t0.Add(-time.Hour)
		mustUpdate(t, db, func(tx *store.Tx) error {
			if err := tx.CreateWorkflow(store.Workflow{ID: "W1", User: "rep-ana"}); err != nil {
				return err
			}
			return tx.PutStep(refund("W1", 1, "O-1", 500, store.StepDone, t0))
		})
		var plain facts
		db.View(func(tx *store.Tx) error { plain = readFacts(tx, since); return nil })
		if plain.orderSpent != 500 || plain.repDay != 500 || plain.agentHour != 500 || !plain.switchOn {
			t.Fatalf("the store's facts before: %+v", plain)
		}
		mustUpdate(t, db, func(tx *store.Tx) error {
			prefetchAll(tx, since)
			if got := readFacts(tx, since); got != plain {
				t.Errorf("after Prefetch: %+v, want %+v", got, plain)
			}
			if err := tx.PutStep(refund("W1", 2, "O-1", 250, store.StepStarted, t0.Add(time.Minute))); err != nil {
				return err
			}
			if err := tx.SetSwitch("issue_refund", false); err != nil {
				return err
			}
			got := readFacts(tx, since)
			if got.orderSpent != 750 || got.repDay != 750 || got.agentHour != 750 || got.switchOn {
				t.Errorf("after its own writes the transaction reads %+v, want 750 spent everywhere and the switch off", got)
			}
			if s, err := tx.Step("W1", 2); err != nil || s.Args.Amount != 250 {
				t.Errorf("the step it wrote: %+v, %v", s, err)
			}
			return nil
		})
	})
}

// A workflow's steps read whole ahead, and numbers drawn ahead, answer as
// the store would: Steps and Step see the steps the transaction writes
// after the prefetch, and the records it numbers get distinct numbers,
// above those of earlier transactions.
func TestPrefetchedStepsAndNumbers(t *testing.T) {
	eachBackend(t, func(t *testing.T, open opener) {
		db := open(t)
		var before store.Decision
		mustUpdate(t, db, func(tx *store.Tx) (err error) {
			if err := tx.CreateWorkflow(store.Workflow{ID: "W1", User: "rep-ana"}); err != nil {
				return err
			}
			if err := tx.PutStep(refund("W1", 1, "O-1", 500, store.StepDone, t0)); err != nil {
				return err
			}
			if err := tx.PutStep(refund("W10", 1, "O-1", 900, store.StepDone, t0)); err != nil {
				return err // a workflow whose id has W1's as its prefix
			}
			before, err = tx.AppendDecision(store.Decision{Workflow: "W1", N: 1})
			return err
		})
		mustUpdate(t, db, func(tx *store.Tx) error {
			tx.Prefetch(store.ReadSteps("W1"), store.ReadSteps("W-none"), store.ReadNumbers(store.DecisionNumbers, 2))
			if steps, err := tx.Steps("W1"); err != nil || len(steps) != 1 || steps[0].Args.Amount != 500 {
				t.Errorf("prefetched steps of W1: %+v, %v", steps, err)
			}
			if steps, err := tx.Steps("W-none"); err != nil || len(steps) != 0 {
				t.Errorf("prefetched steps of a workflow with none: %+v, %v", steps, err)
			}
			if err := tx.PutStep(refund("W1", 2, "O-1", 250, store.StepStarted, t0)); err != nil {
				return err
			}
			if err := tx.PutStep(refund("W1", 1, "O-1", 500, store.StepCompensated, t0)); err != nil {
				return err
			}
			steps, err := tx.Steps("W1")
			if err != nil || len(steps) != 2 || steps[0].Status != store.StepCompensated || steps[1].Args.Amount != 250 {
				t.Errorf("steps after the transaction's writes: %+v, %v", steps, err)
			}
			if s, err := tx.Step("W1", 2); err != nil || s.Args.Amount != 250 {
				t.Errorf("step 2 it wrote: %+v, %v", s, err)
			}
			if _, err := tx.Step("W1", 3); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("a step never written: %v, want ErrNotFound", err)
			}
			seen := map[uint64]bool{before.Seq: true}
			for range 3 { // one more than drawn
				d, err := tx.AppendDecision(store.Decision{Workflow: "W1", N: 2})
				if err != nil {
					return err
				}
				if seen[d.Seq] || d.Seq < before.Seq {
					t.Errorf("decision numbered %d after %v", d.Seq, seen)
				}
				seen[d.Seq] = true
			}
			return nil
		})
		db.View(func(tx *store.Tx) error {
			if steps, err := tx.Steps("W1"); err != nil || len(steps) != 2 || steps[0].Status != store.StepCompensated {
				t.Errorf("committed steps: %+v, %v", steps, err)
			}
			return nil
		})
	})
}

// A write transaction that assumes what a read transaction held reads
// those records from it, not from the store (on PostgreSQL: a record
// changed in between is not seen, which is why only a lease holder's own
// records may be held), and writes over them as usual.
func TestAssumeTakesHeldRecordsAsRead(t *testing.T) {
	eachBackend(t, func(t *testing.T, open opener) {
		db := open(t)
		mustUpdate(t, db, func(tx *store.Tx) error {
			return tx.CreateWorkflow(store.Workflow{ID: "W1", User: "rep-ana", Ticket: "T-1"})
		})
		var held store.Held
		db.View(func(tx *store.Tx) error {
			reads := []store.Read{store.ReadWorkflow("W1"), store.ReadWorkflow("W2"), store.ReadSteps("W1")}
			tx.Prefetch(reads...)
			held = tx.Held(reads...)
			return nil
		})
		mustUpdate(t, db, func(tx *store.Tx) error {
			w, err := tx.Workflow("W1")
			if err != nil {
				return err
			}
			w.Ticket = "T-2"
			return tx.PutWorkflow(w)
		})
		shared := backendName(t) == "postgres"
		mustUpdate(t, db, func(tx *store.Tx) error {
			tx.Assume(held)
			tx.Prefetch(store.ReadWorkflow("W1"), store.ReadSteps("W1"))
			w, err := tx.Workflow("W1")
			if want := map[bool]string{true: "T-1", false: "T-2"}[shared]; err != nil || w.Ticket != want {
				t.Errorf("W1's ticket as the transaction reads it: %q, %v; want %q", w.Ticket, err, want)
			}
			if _, err := tx.Workflow("W2"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("W2, held absent: %v", err)
			}
			if err := tx.CreateWorkflow(store.Workflow{ID: "W2", User: "rep-ben"}); err != nil {
				return err
			}
			return tx.PutStep(refund("W2", 1, "O-1", 100, store.StepStarted, t0))
		})
		db.View(func(tx *store.Tx) error {
			if steps, err := tx.Steps("W2"); err != nil || len(steps) != 1 {
				t.Errorf("W2's steps after the write: %+v, %v", steps, err)
			}
			return nil
		})
	})
}

// backendName is the backend subtest t runs in.
func backendName(t *testing.T) string { return path.Base(t.Name()) }
