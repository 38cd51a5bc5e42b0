package store_test

import (
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
