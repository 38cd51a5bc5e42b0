package sidecar_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/countersign/countersign/cmd/devstack"
)

// The demo's table 1: six refund requests, each in its own workflow, each
// decided by a named rule that the decision log keeps with the revision.
func TestSeedPolicyDecisions(t *testing.T) {
	e := start(t, devstack.Options{})
	cases := []struct {
		rep, order string
		cents      int64
		decision   string
		rule       string
		status     int
		step       string
	}{
		{"rep-ana", "O-1001", 3000, "ALLOW", "default-allow-after-checks", http.StatusOK, "done"},
		{"rep-ana", "O-1002", 12000, "REQUIRE_APPROVAL", "R7-refund-needs-approval", http.StatusAccepted, "waiting_approval"},
		{"rep-ana", "O-1002", 60000, "DENY", "R3-refund-over-ceiling", http.StatusForbidden, "denied"},
		{"rep-ana", "O-1003", 2000, "DENY", "R2-order-outside-region", http.StatusForbidden, "denied"},
		{"rep-cy", "O-1003", 2000, "DENY", "R1-scope-not-delegated", http.StatusForbidden, "denied"},
		{"rep-ana", "O-1001", 15000, "DENY", "R4-exceeds-amount-paid", http.StatusForbidden, "denied"},
	}
	for i, c := range cases {
		wf := fmt.Sprintf("W-T1-%d", i+1)
		t.Run(fmt.Sprintf("%s_%s_%d_%s", c.rep, c.order, c.cents, c.decision), func(t *testing.T) {
			e.open(t, c.rep, wf)
			r, s := e.propose(t, c.rep, wf, "issue_refund", refund(c.order, c.cents))
			r.want(t, c.status, "")
			if s.Status != c.step || s.Decision != c.decision || s.Rule != c.rule || s.N != 1 {
				t.Errorf("step = %s/%s/%s n=%d, want %s/%s/%s n=1", s.Status, s.Decision, s.Rule, s.N, c.step, c.decision, c.rule)
			}
			if c.status == http.StatusForbidden {
				if e := r.errorOf(t); e.Rule != c.rule {
					t.Errorf("error.rule %q, want %q", e.Rule, c.rule)
				}
			}

			d := e.call(t, http.MethodGet, "/v1/decisions?workflow="+wf, "ops-ida", nil)
			d.want(t, http.StatusOK, "")
			var log struct {
				Decisions []struct {
					Workflow, Decision, Rule, Revision, User string
					N                                        int
				} `json:"decisions"`
			}
			d.decode(t, &log)
			if len(log.Decisions) != 1 {
				t.Fatalf("decision log for %s has %d entries, want 1: %s", wf, len(log.Decisions), d.body)
			}
			got := log.Decisions[0]
			if got.Workflow != wf || got.N != 1 || got.User != c.rep || got.Decision != c.decision || got.Rule != c.rule || got.Revision != "p1" {
				t.Errorf("decision = %+v, want %s/1 by %s %s %s revision p1", got, wf, c.rep, c.decision, c.rule)
			}
		})
	}
	// Only the ALLOW executed.
	if got := e.wantLedger(t, 1); got[0].Order != "O-1001" || got[0].Amount != 3000 || got[0].By != "rep-ana" {
		t.Errorf("ledger entry %+v, want $30 on O-1001 by rep-ana", got[0])
	}
}

// The demo's table 2: five wrong approvers of a $400 refund are each refused
// by their own rule, and nothing is paid.
func TestSeedApprovalAuthority(t *testing.T) {
	clock := newManualClock()
	e := start(t, devstack.Options{Clock: clock})
	e.open(t, "rep-ben", "W1")
	r, s := e.propose(t, "rep-ben", "W1", "issue_refund", refund("O-1004", 40000))
	r.want(t, http.StatusAccepted, "")
	if s.Status != "waiting_approval" || s.Approval == nil || s.Approval.Status != "pending" {
		t.Fatalf("step %s: want waiting_approval on a pending approval", r.body)
	}
	const summary = "Refund $400.00 on order O-1004 for customer-4; requested by rep-ben; workflow W1"
	if s.Approval.Summary != summary {
		t.Errorf("step's summary %q, want %q", s.Approval.Summary, summary)
	}
	if want := clock.Now().Add(15 * time.Minute); !s.Approval.Expires.Equal(want) {
		t.Errorf("approval expires %v, want %v (15 minutes)", s.Approval.Expires, want)
	}
	id := s.Approval.ID
	var a approval
	e.call(t, http.MethodGet, "/v1/approvals/"+id, "lead-eli", nil).decode(t, &a)
	if a.Summary != summary || a.Requester != "rep-ben" || a.Workflow != "W1" || a.N != 1 || a.CallHash == "" {
		t.Errorf("approval %+v: want the summary, requester rep-ben, W1/1 and a call hash", a)
	}

	for _, c := range []struct {
		approver string
		advance  time.Duration
		code     string
	}{
		{"rep-ben", 0, "requester_cannot_approve"},
		{"rep-cy", 0, "forbidden_role"},
		{"lead-fay", 0, "above_approver_limit"},
		{"lead-dee", 0, "approver_outside_region"},
		{"lead-eli", 1000 * time.Second, "approval_expired"},
	} {
		t.Run(c.approver, func(t *testing.T) {
			clock.Advance(c.advance)
			e.call(t, http.MethodPost, "/v1/approvals/"+id+"/approve", c.approver, map[string]string{"comment": "ok"}).
				want(t, http.StatusForbidden, c.code)
		})
	}
	var expired approval
	e.call(t, http.MethodGet, "/v1/approvals/"+id, "lead-eli", nil).decode(t, &expired)
	if expired.Status != "expired" || expired.Approver != "" {
		t.Errorf("approval %+v after the refusals, want expired with no approver", expired)
	}
	e.call(t, http.MethodPost, "/v1/approvals/"+id+"/approve", "lead-eli", nil).want(t, http.StatusConflict, "not_pending")
	e.wantLedger(t, 0)

	// The agent's next resume asks again; still nothing is paid.
	w := e.resume(t, "rep-ben", "W1")
	if s := w.Steps[0]; s.Status != "waiting_approval" || s.Approval == nil || s.Approval.ID == id || s.Approval.Status != "pending" {
		t.Errorf("after resume step %+v, want waiting_approval on a new pending approval", s)
	}
	e.wantLedger(t, 0)
}

// The approver is the token's subject: a body cannot name one, and a
// rejection ends the step without paying.
func TestRejectedApproval(t *testing.T) {
	e := start(t, devstack.Options{})
	e.open(t, "rep-ana", "W-rej")
	r, s := e.propose(t, "rep-ana", "W-rej", "issue_refund", refund("O-1002", 12000))
	r.want(t, http.StatusAccepted, "")
	if s.Approval == nil {
		t.Fatalf("no approval on %s", r.body)
	}
	path := "/v1/approvals/" + s.Approval.ID
	e.call(t, http.MethodPost, path+"/approve", "rep-ana", map[string]string{"approver": "lead-dee"}).want(t, http.StatusUnprocessableEntity, "")
	e.call(t, http.MethodPost, path+"/approve", "rep-ana", nil).want(t, http.StatusForbidden, "requester_cannot_approve")
	e.call(t, http.MethodGet, path, "rep-ben", nil).want(t, http.StatusNotFound, "not_found")
	e.call(t, http.MethodGet, "/v1/approvals?status=granted", "lead-dee", nil).want(t, http.StatusBadRequest, "invalid_query")

	var a approval
	rej := e.call(t, http.MethodPost, path+"/reject", "lead-dee", map[string]string{"comment": "not damaged"})
	rej.want(t, http.StatusOK, "")
	rej.decode(t, &a)
	if a.Status != "rejected" || a.Approver != "lead-dee" {
		t.Errorf("reject answered %s", rej.body)
	}
	e.call(t, http.MethodPost, path+"/approve", "lead-dee", nil).want(t, http.StatusConflict, "not_pending")
	w := e.resume(t, "rep-ana", "W-rej")
	if w.Status != "failed" || w.Steps[0].Status != "denied" {
		t.Errorf("after the rejection workflow %s step %s, want failed and denied", w.Status, w.Steps[0].Status)
	}
	e.wantLedger(t, 0)
}

// The demo's table 3: an approval of $120 cannot pay the step once it was
// amended to $450.
func TestSeedAmendedAfterApproval(t *testing.T) {
	e := start(t, devstack.Options{})
	e.open(t, "rep-ana", "W3")
	r, s := e.propose(t, "rep-ana", "W3", "issue_refund", refund("O-1002", 12000))
	r.want(t, http.StatusAccepted, "")
	if s.Approval == nil {
		t.Fatalf("no approval on %s", r.body)
	}
	oldID := s.Approval.ID

	var a approval
	ap := e.call(t, http.MethodPost, "/v1/approvals/"+oldID+"/approve", "lead-dee", nil)
	ap.want(t, http.StatusOK, "")
	ap.decode(t, &a)
	if a.ID != oldID || a.Status != "approved" || a.Approver != "lead-dee" {
		t.Fatalf("approve answered %s, want status approved by lead-dee", ap.body)
	}
	// Approving twice is a conflict, not a second approval.
	e.call(t, http.MethodPost, "/v1/approvals/"+oldID+"/approve", "lead-dee", nil).want(t, http.StatusConflict, "not_pending")

	// A claimed approval in the amended args is a schema error, not an approval.
	claimed := refund("O-1002", 45000)
	claimed["approved_by"] = "lead-dee"
	e.call(t, http.MethodPatch, "/v1/workflows/W3/steps/1", "rep-ana", map[string]any{"args": claimed}).want(t, http.StatusUnprocessableEntity, "")
	e.call(t, http.MethodPatch, "/v1/workflows/W3/steps/1", "lead-dee", map[string]any{"args": refund("O-1002", 45000)}).want(t, http.StatusForbidden, "forbidden_role")

	am := e.call(t, http.MethodPatch, "/v1/workflows/W3/steps/1", "rep-ana", map[string]any{"args": refund("O-1002", 45000)})
	am.want(t, http.StatusOK, "")
	var amended step
	am.decode(t, &amended)
	if amended.Args["amount"] != float64(45000) {
		t.Errorf("amended args %v, want amount 45000", amended.Args)
	}

	w := e.resume(t, "rep-ana", "W3")
	if len(w.Steps) != 1 {
		t.Fatalf("workflow has %d steps, want 1", len(w.Steps))
	}
	got := w.Steps[0]
	if got.Status != "waiting_approval" || got.Approval == nil {
		t.Fatalf("after resume step is %+v, want waiting_approval on a new approval", got)
	}
	if got.Approval.ID == oldID || got.Approval.Status != "pending" {
		t.Errorf("approval %s %s, want a new pending one (old %s)", got.Approval.ID, got.Approval.Status, oldID)
	}
	if want := "Refund $450.00 on order O-1002 for customer-2; requested by rep-ana; workflow W3"; got.Approval.Summary != want {
		t.Errorf("new summary %q, want %q", got.Approval.Summary, want)
	}
	if w.Status != "waiting_approval" {
		t.Errorf("workflow status %q, want waiting_approval", w.Status)
	}
	var old approval
	e.call(t, http.MethodGet, "/v1/approvals/"+oldID, "lead-dee", nil).decode(t, &old)
	if old.Status != "void" {
		t.Errorf("old approval status %q, want void", old.Status)
	}
	e.wantLedger(t, 0)

	// The voided approval cannot be approved again either.
	e.call(t, http.MethodPost, "/v1/approvals/"+oldID+"/approve", "lead-dee", nil).want(t, http.StatusConflict, "not_pending")

	t.Run("amend after done", func(t *testing.T) {
		e.open(t, "rep-ana", "W3-done")
		r, _ := e.propose(t, "rep-ana", "W3-done", "issue_refund", refund("O-1001", 3000))
		r.want(t, http.StatusOK, "")
		e.call(t, http.MethodPatch, "/v1/workflows/W3-done/steps/1", "rep-ana", map[string]any{"args": refund("O-1001", 4000)}).
			want(t, http.StatusConflict, "step_not_amendable")
		if got := e.ledger(t); len(got) != 1 || got[0].Amount != 3000 {
			t.Errorf("ledger %+v, want the one $30 refund", got)
		}
	})
}
