package sidecar_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/cmd/devstack"
)

// boundedWorkflow is the answer to POST /v1/workflows with its bounds.
type boundedWorkflow struct {
	ID     string `json:"id"`
	Bounds struct {
		MaxSteps    int       `json:"max_steps"`
		MaxSpend    int64     `json:"max_spend"`
		Deadline    time.Time `json:"deadline"`
		MaxAttempts int       `json:"max_attempts"`
	} `json:"bounds"`
}

// openBounded opens workflow id for rep-ana with bounds and expects 201.
func (e *env) openBounded(t *testing.T, id string, bounds map[string]any) boundedWorkflow {
	t.Helper()
	r := e.call(t, http.MethodPost, "/v1/workflows", "rep-ana", map[string]any{"ticket": "T-" + id, "id": id, "bounds": bounds})
	r.want(t, http.StatusCreated, "")
	var w boundedWorkflow
	r.decode(t, &w)
	return w
}

// The embedded p1 has no bound rules: the dev stack runs on the default
// bounds, narrowed at creation, and the engine stops the step that would
// cross one with the bound's rule.
func TestBoundsStopStepsOverHTTP(t *testing.T) {
	e := start(t, devstack.Options{})
	w := e.openBounded(t, "W-steps", map[string]any{"max_steps": 2})
	if w.Bounds.MaxSteps != 2 || w.Bounds.MaxSpend != 100000 || w.Bounds.MaxAttempts != 10 {
		t.Errorf("bounds %+v, want max_steps 2 and the defaults (max_spend 100000, max_attempts 10)", w.Bounds)
	}
	for i, order := range []string{"O-1001", "O-1002", "O-1005"} { // EU orders, rep-ana's region
		_, s := e.propose(t, "rep-ana", "W-steps", "lookup_order", map[string]string{"order": order})
		if want := i < 2; (s.Status == "done") != want || !want && s.Rule != "B1-workflow-step-limit" {
			t.Errorf("step %d: %s %s, want done for the first two and denied B1-workflow-step-limit for the third", i+1, s.Status, s.Rule)
		}
	}

	e.openBounded(t, "W-spend", map[string]any{"max_spend": 5000})
	for _, tc := range []struct {
		order  string
		amount int64
		status string
		rule   string
	}{
		{"O-1001", 3000, "done", "default-allow-after-checks"},
		{"O-1002", 2001, "denied", "B2-workflow-spend-limit"},
		{"O-1005", 2000, "done", "default-allow-after-checks"}, // lands on max_spend
	} {
		_, s := e.propose(t, "rep-ana", "W-spend", "issue_refund", refund(tc.order, tc.amount))
		if s.Status != tc.status || s.Rule != tc.rule {
			t.Errorf("refund %d on %s: %s %s, want %s %s", tc.amount, tc.order, s.Status, s.Rule, tc.status, tc.rule)
		}
	}
	e.wantLedger(t, 2)
}

// Past its deadline a workflow pays nothing more: its step waiting for a
// lead ends denied B3 at the next resume, and the next proposal is denied
// B3, with no timer: the simulated clock moved.
func TestBoundsDeadlineOverHTTP(t *testing.T) {
	clock := newManualClock()
	e := start(t, devstack.Options{Clock: clock})
	e.openBounded(t, "W-late", map[string]any{"deadline": clock.Now().Add(time.Hour).Format(time.RFC3339)})
	r, s := e.propose(t, "rep-ana", "W-late", "issue_refund", refund("O-1002", 12000))
	r.want(t, http.StatusAccepted, "")
	if s.Status != "waiting_approval" {
		t.Fatalf("step 1 %s, want waiting_approval", s.Status)
	}
	clock.Advance(time.Hour + time.Second)
	w := e.resume(t, "rep-ana", "W-late")
	if got := w.Steps[0]; got.Status != "denied" || got.Rule != "B3-workflow-deadline" {
		t.Errorf("waiting step after the deadline: %s %s, want denied B3-workflow-deadline", got.Status, got.Rule)
	}
	if _, s := e.propose(t, "rep-ana", "W-late", "issue_refund", refund("O-1001", 1000)); s.Status != "denied" || s.Rule != "B3-workflow-deadline" {
		t.Errorf("a refund after the deadline: %s %s, want denied B3-workflow-deadline", s.Status, s.Rule)
	}
	e.wantLedger(t, 0)
}

// Bounds may only narrow the bundle's: a wider or malformed value is 422
// invalid_request naming the field and, when it is too wide, the bundle's
// bound; an unknown member is refused by the strict decoder.
func TestBoundsWiderThanTheBundleAre422(t *testing.T) {
	e := start(t, devstack.Options{})
	for _, tc := range []struct {
		name   string
		bounds any
		says   string
	}{
		{"more steps", map[string]any{"max_steps": 201}, "bounds.max_steps"},
		{"more spend", map[string]any{"max_spend": 100001}, "bundle's bound of 100000 cents"},
		{"a later deadline", map[string]any{"deadline": time.Now().Add(48 * time.Hour).Format(time.RFC3339)}, "bounds.deadline"},
		{"fractional cents", map[string]any{"max_spend": 10.5}, "max_spend"},
		{"an unknown member", map[string]any{"max_attempts": 2}, "max_attempts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.call(t, http.MethodPost, "/v1/workflows", "rep-ana", map[string]any{"ticket": "T-wide", "bounds": tc.bounds})
			r.want(t, http.StatusUnprocessableEntity, "invalid_request")
			if msg := r.errorOf(t).Message; !strings.Contains(msg, tc.says) {
				t.Errorf("message %q does not say %q", msg, tc.says)
			}
		})
	}
}

// A refund whose ledger is down is tried at most max_attempts times (10
// by default): each 503 keeps the refund's reservation, the step started
// with its resolve_after; each resume after that proves it absent (no
// entry under its key), releases it and dispatches it again, until the
// bound, and the next resume denies it B4 with nothing paid. A resume
// before resolve_after sends nothing.
func TestBoundsAttemptsOverHTTP(t *testing.T) {
	clock := newManualClock()
	e := start(t, devstack.Options{Clock: clock})
	e.openBounded(t, "W-attempts", nil)
	faults := e.st.Endpoints.Ledger + "/_sim/faults"
	e.sim(t, http.MethodPut, faults, map[string]int{"unavailable": 1000}, http.StatusOK)
	r, _ := e.propose(t, "rep-ana", "W-attempts", "issue_refund", refund("O-1001", 3000))
	r.want(t, http.StatusServiceUnavailable, "system_unavailable")
	w := e.resume(t, "rep-ana", "W-attempts")
	if s := w.Steps[0]; s.Status != "started" || s.ResolveAfter == nil || !s.ResolveAfter.After(clock.Now()) {
		t.Fatalf("after the 503: step %s, resolve_after %v; want started, resolvable later", s.Status, s.ResolveAfter)
	}
	for range 20 {
		clock.Set(*w.Steps[0].ResolveAfter)
		if w = e.resume(t, "rep-ana", "W-attempts"); w.Steps[0].Status != "started" {
			break
		}
	}
	if s := w.Steps[0]; s.Status != "denied" || s.Rule != "B4-attempt-limit" {
		t.Fatalf("after the ledger stayed down: step %s %s, want denied B4-attempt-limit", s.Status, s.Rule)
	}
	e.sim(t, http.MethodPut, faults, map[string]int{}, http.StatusOK)
	if w := e.resume(t, "rep-ana", "W-attempts"); w.Steps[0].Status != "denied" {
		t.Errorf("the ledger back: step %s, want it to stay denied", w.Steps[0].Status)
	}
	e.wantLedger(t, 0)
}
