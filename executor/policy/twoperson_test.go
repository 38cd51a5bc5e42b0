package policy_test

import (
	"errors"
	"testing"

	"github.com/countersign/countersign/executor/policy"
)

// A bundle that loosens a limit waits for a second operator: recorded as
// awaiting, the active bundle unchanged; the proposer cannot approve it;
// another operator activates it, and the record names both.
func TestLooseningNeedsASecondOperator(t *testing.T) {
	h := &policy.MemHistory{}
	e := activeEngine(t, "p1", policy.Options{History: h})
	p4 := mustSource(t, "p4", map[string]int64{"refund_auto": 7500}, policy.LimitChange{Name: "refund_auto", From: 5000, To: 7500})

	_, err := e.Activate(ctx, p4, policy.Activation{By: "ops-ida"})
	var aw *policy.AwaitingError
	if !errors.As(err, &aw) || aw.Digest != p4.Digest() || len(aw.Loosens) != 1 || e.Revision() != "p1" {
		t.Fatalf("loosening upload: %v; active %s", err, e.Revision())
	}
	if last := h.Records()[len(h.Records())-1]; last.Status != policy.StatusAwaitingSecondOperator || last.By != "ops-ida" {
		t.Errorf("record %+v, want awaiting_second_operator by ops-ida", last)
	}
	if _, err := e.Activate(ctx, p4, policy.Activation{By: "ops-ida", Proposer: "ops-ida"}); !errors.Is(err, policy.ErrSameOperator) || e.Revision() != "p1" {
		t.Fatalf("approved by its proposer: %v; active %s", err, e.Revision())
	}
	if _, err := e.Activate(ctx, p4, policy.Activation{By: "ops-jon", Proposer: "ops-ida"}); err != nil || e.Revision() != "p4" {
		t.Fatalf("approved by another operator: %v; active %s", err, e.Revision())
	}
	if last := h.Records()[len(h.Records())-1]; last.Status != policy.StatusActive || last.By != "ops-jon" || last.Proposer != "ops-ida" {
		t.Errorf("record %+v, want active by ops-jon proposed by ops-ida", last)
	}

	// Back to p3 by rollback: the request declares p3's limits, a
	// tightening, so it activates at once.
	if _, err := e.Activate(ctx, embedded(t, "p3"), policy.Activation{By: "ops-ida", Rollback: true}); err != nil || e.Revision() != "p3" {
		t.Fatalf("rollback to p3: %v; active %s", err, e.Revision())
	}
	// And forth to p4 by rollback: a loosening, so it waits again.
	if _, err := e.Activate(ctx, p4, policy.Activation{By: "ops-ida", Rollback: true}); !errors.As(err, &aw) || e.Revision() != "p3" {
		t.Fatalf("rollback to p4: %v; active %s", err, e.Revision())
	}
}

// Break-glass needs a second operator too, and its record keeps the gate's
// failures it overrode.
func TestBreakGlassNeedsASecondOperator(t *testing.T) {
	h := &policy.MemHistory{}
	e := activeEngine(t, "p1", policy.Options{History: h})
	p2 := embedded(t, "p2")
	var aw *policy.AwaitingError
	if _, err := e.Activate(ctx, p2, policy.Activation{By: "ops-ida", BreakGlass: true, Reason: "drill"}); !errors.As(err, &aw) || !aw.BreakGlass || e.Revision() != "p1" {
		t.Fatalf("break glass by one operator: %v; active %s", err, e.Revision())
	}
	if _, err := e.Activate(ctx, p2, policy.Activation{By: "ops-jon", Proposer: "ops-ida", BreakGlass: true, Reason: "drill"}); err != nil || e.Revision() != "p2" {
		t.Fatalf("break glass by two: %v; active %s", err, e.Revision())
	}
	last := h.Records()[len(h.Records())-1]
	if len(last.Failures) != 5 { // two undeclared limits and p2's three boundary cases
		t.Errorf("break-glass record failures %+v, want the five the gate found", last.Failures)
	}
}
