package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

// Bundle p1 has no bound rules: the engine bounds the workflow itself,
// after the policy allows, with the same rule names.
func TestEngineBoundsAWorkflowUnderABundleWithoutTheRules(t *testing.T) {
	h := newHarness(t, engine.DefaultControls())
	ctx := context.Background()
	steps, spend := 3, money.Cents(5000)
	deadline := h.clock.Now().Add(time.Hour)
	w, _, err := h.eng.OpenWorkflow(ctx, person("rep-ana"), engine.NewWorkflow{ID: "B", Ticket: "T-B",
		Bounds: engine.Bounds{MaxSteps: &steps, MaxSpend: &spend, Deadline: &deadline}})
	if err != nil {
		t.Fatal(err)
	}
	want := store.Bounds{MaxSteps: 3, MaxSpend: 5000, Deadline: deadline, MaxAttempts: policy.DefaultBounds.MaxAttempts}
	if w.Bounds != want {
		t.Fatalf("bounds %+v, want %+v", w.Bounds, want)
	}
	for i, tc := range []struct {
		args   string
		status store.StepStatus
		rule   string
	}{
		{`{"order":"O-1001","amount":3000}`, store.StepDone, "default-allow-after-checks"},
		{`{"order":"O-1002","amount":2001}`, store.StepDenied, engine.RuleSpendLimit},
		{`{"order":"O-1002","amount":2000}`, store.StepDenied, engine.RuleStepLimit}, // lands on max_spend, but it is the 4th step
	} {
		if i == 2 {
			h.propose("rep-ana", "B", tool.LookupOrder, `{"order":"O-1001"}`) // the 3rd step
		}
		s := h.propose("rep-ana", "B", tool.IssueRefund, tc.args)
		if s.Status != tc.status || s.Rule != tc.rule {
			t.Errorf("%s: %s %s, want %s %s", tc.args, s.Status, s.Rule, tc.status, tc.rule)
		}
	}
}

// A refund that lands exactly on max_spend is paid.
func TestEngineRefundLandingOnMaxSpendIsPaid(t *testing.T) {
	h := newHarness(t, engine.DefaultControls())
	spend := money.Cents(5000)
	if _, _, err := h.eng.OpenWorkflow(context.Background(), person("rep-ana"),
		engine.NewWorkflow{ID: "S", Ticket: "T-S", Bounds: engine.Bounds{MaxSpend: &spend}}); err != nil {
		t.Fatal(err)
	}
	for _, args := range []string{`{"order":"O-1001","amount":3000}`, `{"order":"O-1002","amount":2000}`} {
		if s := h.propose("rep-ana", "S", tool.IssueRefund, args); s.Status != store.StepDone {
			t.Errorf("%s: %s %s, want done", args, s.Status, s.Rule)
		}
	}
}

// Past its deadline a workflow pays nothing more: at the next resume its
// step waiting for an approval ends denied under B3, and a new proposal
// is denied under B3 too. No timer did it: the clock moved and a call came.
func TestEnginePastTheDeadlineEndsOpenSteps(t *testing.T) {
	h := newHarness(t, engine.DefaultControls())
	ctx := context.Background()
	deadline := h.clock.Now().Add(time.Hour)
	if _, _, err := h.eng.OpenWorkflow(ctx, person("rep-ana"),
		engine.NewWorkflow{ID: "D", Ticket: "T-D", Bounds: engine.Bounds{Deadline: &deadline}}); err != nil {
		t.Fatal(err)
	}
	waiting := h.propose("rep-ana", "D", tool.IssueRefund, `{"order":"O-1002","amount":12000}`)
	if waiting.Status != store.StepWaitingApproval {
		t.Fatalf("step 1 %s, want waiting_approval", waiting.Status)
	}
	h.clock.Advance(time.Hour)
	if s := h.propose("rep-ana", "D", tool.IssueRefund, `{"order":"O-1001","amount":1000}`); s.Status != store.StepDone {
		t.Fatalf("at the deadline: %s %s, want done", s.Status, s.Rule)
	}
	h.clock.Advance(time.Second)
	snap, err := h.eng.Resume(ctx, person("rep-ana"), "D")
	if err != nil {
		t.Fatal(err)
	}
	if s := snap.Steps[0]; s.Status != store.StepDenied || s.Rule != engine.RuleDeadline ||
		s.Reason == nil || s.Reason.Text != "the workflow's deadline has passed: it pays nothing more" {
		t.Errorf("waiting step after the deadline: %s %s (reason %+v), want denied %s with its reason", s.Status, s.Rule, s.Reason, engine.RuleDeadline)
	}
	if a, err := h.eng.Approval(ctx, waiting.Approval); err != nil || a.Status == store.ApprovalPending {
		t.Errorf("its approval: %+v, %v; want it no longer pending", a.Status, err)
	}
	if s := h.propose("rep-ana", "D", tool.LookupOrder, `{"order":"O-1001"}`); s.Status != store.StepDenied || s.Rule != engine.RuleDeadline {
		t.Errorf("a lookup after the deadline: %s %s, want denied %s", s.Status, s.Rule, engine.RuleDeadline)
	}
}

// Each bound may only narrow the bundle's; a wider or empty one is refused
// naming the field and the bundle's bound.
func TestEngineNarrowingWiderThanTheBundleIsRefused(t *testing.T) {
	h := newHarness(t, engine.DefaultControls())
	now := h.clock.Now()
	steps, zero, spend := policy.DefaultBounds.MaxSteps+1, 0, money.Cents(100001)
	late, past := now.Add(25*time.Hour), now.Add(-time.Second)
	for _, tc := range []struct {
		name   string
		bounds engine.Bounds
		field  string
		says   string
	}{
		{"more steps", engine.Bounds{MaxSteps: &steps}, "bounds.max_steps", "bound of 200 steps"},
		{"no steps", engine.Bounds{MaxSteps: &zero}, "bounds.max_steps", "bound of 200 steps"},
		{"more spend", engine.Bounds{MaxSpend: &spend}, "bounds.max_spend", "bound of 100000 cents"},
		{"a later deadline", engine.Bounds{Deadline: &late}, "bounds.deadline", "bound of 24h0m0s"},
		{"a deadline passed", engine.Bounds{Deadline: &past}, "bounds.deadline", "must be after now"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := h.eng.OpenWorkflow(context.Background(), person("rep-ana"),
				engine.NewWorkflow{ID: "N", Ticket: "T-N", Bounds: tc.bounds})
			var ie *engine.InvalidError
			if !errors.As(err, &ie) || ie.Field != tc.field || !strings.Contains(ie.Problem, tc.says) {
				t.Errorf("err %v, want an InvalidError on %s saying %q", err, tc.field, tc.says)
			}
		})
	}
}

// A step whose dispatch keeps failing is tried at most max_attempts
// times: the next resume denies it under B4. Each failure (the ledger
// unavailable) keeps the reservation until the step's tokens have expired,
// so each resume comes after that: it proves the refund absent, releases
// it and decides it again, which counts an attempt.
func TestEngineAttemptsAreBounded(t *testing.T) {
	h := newHarness(t, engine.DefaultControls())
	ctx := context.Background()
	h.workflow("rep-ana", "A")
	h.sys.mu.Lock()
	h.sys.failNext = policy.DefaultBounds.MaxAttempts
	h.sys.mu.Unlock()
	if _, err := h.eng.Propose(ctx, person("rep-ana"), "A", tool.IssueRefund, []byte(`{"order":"O-1001","amount":1000}`)); !errors.Is(err, engine.ErrUnavailable) {
		t.Fatalf("attempt 1: %v, want ErrUnavailable", err)
	}
	for i := 2; i <= policy.DefaultBounds.MaxAttempts; i++ {
		h.clock.Advance(time.Minute) // past the step's resolve_after
		if _, err := h.eng.Resume(ctx, person("rep-ana"), "A"); !errors.Is(err, engine.ErrUnavailable) {
			t.Fatalf("attempt %d: %v, want ErrUnavailable", i, err)
		}
	}
	h.clock.Advance(time.Minute)
	snap, err := h.eng.Resume(ctx, person("rep-ana"), "A")
	if err != nil {
		t.Fatal(err)
	}
	if s := snap.Steps[0]; s.Status != store.StepDenied || s.Rule != engine.RuleAttemptLimit || s.Attempts != policy.DefaultBounds.MaxAttempts {
		t.Errorf("after %d failed attempts: %s %s (%d attempts), want denied %s", policy.DefaultBounds.MaxAttempts, s.Status, s.Rule, s.Attempts, engine.RuleAttemptLimit)
	}
}
