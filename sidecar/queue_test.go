package sidecar_test

import (
	"net/http"
	"testing"

	"github.com/countersign/countersign/cmd/devstack"
)

// queued is an approval as the queue shows it to a reviewer.
type queued struct {
	approval
	Rule          string `json:"rule"`
	Ticket        string `json:"ticket"`
	Customer      string `json:"customer"`
	OrderPaid     int64  `json:"order_paid"`
	OrderRefunded *int64 `json:"order_refunded"`
	CanApprove    *bool  `json:"can_approve"`
	Code          string `json:"code"`
	Replaces      *struct {
		ID   string         `json:"id"`
		Args map[string]any `json:"args"`
	} `json:"replaces"`
}

func (e *env) queue(t *testing.T, who, query string) map[string]queued {
	t.Helper()
	var got struct {
		Approvals []queued `json:"approvals"`
	}
	r := e.call(t, http.MethodGet, "/v1/approvals"+query, who, nil)
	r.want(t, http.StatusOK, "")
	r.decode(t, &got)
	out := map[string]queued{}
	for _, a := range got.Approvals {
		out[a.ID] = a
	}
	return out
}

// A lead's queue lists by default what that lead may approve, with what
// they need to decide; the whole queue says of each item whether they may
// and, if not, why, in the approve endpoint's codes.
func TestApprovalQueueIsTheLeadsOwn(t *testing.T) {
	e := start(t, devstack.Options{})
	e.open(t, "rep-ben", "W-ben")
	e.propose(t, "rep-ben", "W-ben", "issue_refund", refund("O-1004", 2000)) // paid outright
	r, s := e.propose(t, "rep-ben", "W-ben", "issue_refund", refund("O-1004", 40000))
	r.want(t, http.StatusAccepted, "")
	id := s.Approval.ID

	eli := e.queue(t, "lead-eli", "?status=pending")[id]
	if eli.ID != id || eli.CanApprove == nil || !*eli.CanApprove || eli.Code != "" {
		t.Fatalf("lead-eli's queue: %+v; want %s with can_approve true", eli, id)
	}
	if eli.Rule == "" || eli.Ticket != "T-W-ben" || eli.Customer != "customer-4" || eli.OrderPaid != 42000 ||
		eli.OrderRefunded == nil || *eli.OrderRefunded != 2000 {
		t.Errorf("details: rule %q ticket %q customer %q paid %d refunded %v; want a rule, T-W-ben, customer-4, 42000, 2000",
			eli.Rule, eli.Ticket, eli.Customer, eli.OrderPaid, eli.OrderRefunded)
	}
	for who, code := range map[string]string{
		"lead-fay": "above_approver_limit",    // $100 limit
		"lead-dee": "approver_outside_region", // EU
		"rep-ben":  "",                        // not a lead: 403 on the route
	} {
		if who == "rep-ben" {
			e.call(t, http.MethodGet, "/v1/approvals?status=pending", who, nil).want(t, http.StatusForbidden, "forbidden_role")
			continue
		}
		if _, listed := e.queue(t, who, "?status=pending")[id]; listed {
			t.Errorf("%s's default queue lists %s, which they may not approve", who, id)
		}
		got := e.queue(t, who, "?status=pending&all=true")[id]
		if got.CanApprove == nil || *got.CanApprove || got.Code != code {
			t.Errorf("%s's whole queue: can_approve %v code %q; want false %q", who, got.CanApprove, got.Code, code)
		}
	}
	// The item's code is what approving answers.
	e.call(t, http.MethodPost, "/v1/approvals/"+id+"/approve", "lead-fay", nil).want(t, http.StatusForbidden, "above_approver_limit")
	e.call(t, http.MethodGet, "/v1/approvals?all=maybe", "lead-eli", nil).want(t, http.StatusBadRequest, "invalid_query")

	// An operator sees the whole queue and approves nothing.
	op := e.queue(t, "ops-ida", "?status=pending")[id]
	if op.ID != id || op.Code != "forbidden_role" {
		t.Errorf("operator's queue: %+v; want %s with code forbidden_role", op, id)
	}

	// Once approved it is no longer anyone's to approve.
	e.call(t, http.MethodPost, "/v1/approvals/"+id+"/approve", "lead-eli", nil).want(t, http.StatusOK, "")
	var one queued
	e.call(t, http.MethodGet, "/v1/approvals/"+id, "lead-eli", nil).decode(t, &one)
	if one.CanApprove == nil || *one.CanApprove || one.Code != "not_pending" {
		t.Errorf("approved approval: can_approve %v code %q; want false not_pending", one.CanApprove, one.Code)
	}
	if _, listed := e.queue(t, "lead-eli", "?status=pending")[id]; listed {
		t.Errorf("an approved approval is still in the pending queue")
	}
}

// A re-request after an amendment shows the earlier call beside the new one.
func TestApprovalQueueShowsTheReplacedCall(t *testing.T) {
	e := start(t, devstack.Options{})
	e.open(t, "rep-ben", "W-amend")
	_, s := e.propose(t, "rep-ben", "W-amend", "issue_refund", refund("O-1004", 40000))
	old := s.Approval.ID
	e.call(t, http.MethodPatch, "/v1/workflows/W-amend/steps/1", "rep-ben", map[string]any{"args": refund("O-1004", 30000)}).
		want(t, http.StatusOK, "")
	w := e.resume(t, "rep-ben", "W-amend")
	id := w.Steps[0].Approval.ID
	got := e.queue(t, "lead-eli", "?status=pending")[id]
	if id == old || got.Replaces == nil || got.Replaces.ID != old || got.Replaces.Args["amount"] != float64(40000) {
		t.Fatalf("re-requested approval %s: replaces %+v; want %s with amount 40000", id, got.Replaces, old)
	}
}
