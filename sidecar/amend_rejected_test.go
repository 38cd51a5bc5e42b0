package sidecar_test

import (
	"net/http"
	"testing"

	"github.com/countersign/countersign/cmd/devstack"
)

// A lead rejects a refund, the rep amends the amount: the amended call is a
// new call and asks for a new approval; the rejection stays as it was.
func TestAmendAfterRejectionAsksAgain(t *testing.T) {
	e := start(t, devstack.Options{})
	e.open(t, "rep-ana", "W-rejected")
	r, s := e.propose(t, "rep-ana", "W-rejected", "issue_refund", refund("O-1002", 12000))
	r.want(t, http.StatusAccepted, "")
	old := s.Approval.ID
	e.call(t, http.MethodPost, "/v1/approvals/"+old+"/reject", "lead-dee", map[string]string{"comment": "too much"}).want(t, http.StatusOK, "")
	e.call(t, http.MethodPatch, "/v1/workflows/W-rejected/steps/1", "rep-ana", map[string]any{"args": refund("O-1002", 11000)}).
		want(t, http.StatusOK, "")

	w := e.resume(t, "rep-ana", "W-rejected")
	got := w.Steps[0]
	if got.Status != "waiting_approval" || got.Approval == nil || got.Approval.ID == old || got.Approval.Status != "pending" {
		t.Fatalf("after resume: step %s, approval %+v; want waiting_approval on a new pending approval", got.Status, got.Approval)
	}
	var a approval
	e.call(t, http.MethodGet, "/v1/approvals/"+old, "lead-dee", nil).decode(t, &a)
	if a.Status != "rejected" || a.Approver != "lead-dee" {
		t.Errorf("old approval %+v, want rejected by lead-dee", a)
	}
	e.wantLedger(t, 0)
}
