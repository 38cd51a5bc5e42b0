package engine_test

import (
	"context"
	"testing"

	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

// With Facts, a queue item carries the decision that asked for it (the
// bundle's revision and digest, and the totals the policy was given) and
// the refunds already on its order, in any workflow; without, neither.
func TestApprovalQueueFacts(t *testing.T) {
	h := newHarness(t, engine.DefaultControls())
	h.workflow("rep-ben", "W-paid")
	if s := h.propose("rep-ben", "W-paid", tool.IssueRefund, `{"order":"O-1004","amount":2000}`); s.Status != store.StepDone {
		t.Fatalf("a $20 refund: %s, want done", s.Status)
	}
	h.workflow("rep-ben", "W-ask")
	s := h.propose("rep-ben", "W-ask", tool.IssueRefund, `{"order":"O-1004","amount":40000}`)
	if s.Approval == "" {
		t.Fatalf("a $400 refund: %s, want waiting for an approval", s.Status)
	}
	lead := person("lead-eli")

	items, err := h.eng.ApprovalQueue(context.Background(), lead, engine.ApprovalQuery{Status: store.ApprovalPending, Facts: true})
	if err != nil || len(items) != 1 {
		t.Fatalf("queue: %d items, %v", len(items), err)
	}
	it := items[0]
	a := it.Asked
	if a == nil || a.Revision != h.pol.Revision() || a.Digest == "" || a.Rule != s.Rule || !a.Known ||
		a.OrderRefunded != money.Cents(2000) || a.RepDay != money.Cents(2000) {
		t.Errorf("asked: %+v; want revision %s with a digest, rule %s, order refunded and rep's day $20.00", a, h.pol.Revision(), s.Rule)
	}
	if r := it.OrderRefunds; len(r) != 1 || r[0].Workflow != "W-paid" || r[0].Amount != 2000 || r[0].User != "rep-ben" {
		t.Errorf("order refunds: %+v; want W-paid's $20.00 by rep-ben", r)
	}

	items, err = h.eng.ApprovalQueue(context.Background(), lead, engine.ApprovalQuery{Status: store.ApprovalPending})
	if err != nil || len(items) != 1 || items[0].Asked != nil || items[0].OrderRefunds != nil {
		t.Errorf("without Facts: %+v, %v; want neither the decision nor the refunds read", items, err)
	}
}
