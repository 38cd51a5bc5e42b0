package engine_test

import (
	"context"
	"errors"
	"testing"

	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

func TestRatifyAndReverse(t *testing.T) {
	h := newHarness(t, engine.DefaultControls())
	ctx := context.Background()
	h.workflow("rep-ana", "W1")
	h.propose("rep-ana", "W1", tool.IssueRefund, `{"order":"O-1001","amount":3000}`)
	h.propose("rep-ana", "W1", tool.IssueRefund, `{"order":"O-1002","amount":4000}`)

	// The approver rules apply: the requester and other regions are refused.
	for who, code := range map[string]string{"rep-ana": "requester_cannot_approve", "lead-eli": "approver_outside_region"} {
		var refused *engine.ApprovalRefused
		if _, err := h.eng.Ratify(ctx, person(who), "W1", 1, ""); !errors.As(err, &refused) || refused.Code != code {
			t.Errorf("ratify as %s: %v, want %s", who, err, code)
		}
	}
	a, err := h.eng.Ratify(ctx, person("lead-dee"), "W1", 1, "damaged goods, replacement shipped")
	if err != nil || !a.Retroactive || a.Status != store.ApprovalUsed || a.Approver != "lead-dee" {
		t.Fatalf("ratify: %+v %v", a, err)
	}
	if _, err := h.eng.Reverse(ctx, person("lead-dee"), "W1", 1, ""); !errors.Is(err, engine.ErrNotCompensable) {
		t.Errorf("reversing a ratified refund: %v", err)
	}

	s, err := h.eng.Reverse(ctx, person("lead-dee"), "W1", 2, "customer to be asked to return it")
	if err != nil || s.Status != store.StepCompensated || len(h.sys.reversals) != 1 || h.sys.reversals[0] != "L2" {
		t.Fatalf("reverse: %s %v %v", s.Status, h.sys.reversals, err)
	}
	// A compensated refund no longer counts against the order.
	if _, err := h.eng.Reverse(ctx, person("lead-dee"), "W1", 2, ""); !errors.Is(err, engine.ErrNotCompensable) {
		t.Errorf("reversing twice: %v", err)
	}
	err = h.db.View(func(tx *store.Tx) error {
		if got := tx.OrderSpent("O-1002"); got != 0 {
			t.Errorf("O-1002 spent after reversal: %v", got)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
