package sidecar_test

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/countersign/countersign/cmd/devstack"
)

// approversBundle is p1 whose approver rules allow anyone ids names,
// whatever their role, region or limit, before any other approver rule:
// the bundle of issue 20's second hole. The gate's approver cases name
// other people, so it passes the gate.
func approversBundle(t *testing.T, ids ...string) fstest.MapFS {
	t.Helper()
	fsys := p1Edited(t, "p1-"+strings.Join(ids, "-")+"-approve", func(s string) string { return s }, nil)
	const first = `verdict := refused("requester_cannot_approve") if {`
	f := fsys["approver/approver.rego"]
	if !bytes.Contains(f.Data, []byte(first)) {
		t.Fatalf("p1's approver rules no longer start with %s", first)
	}
	quoted := make([]string, len(ids))
	for i, id := range ids {
		quoted[i] = fmt.Sprintf("%q", id)
	}
	f.Data = bytes.Replace(f.Data, []byte(first), fmt.Appendf(nil, `verdict := {"allowed": true} if {
	input.approver.id in {%s}
} else := refused("requester_cannot_approve") if {`, strings.Join(quoted, ", ")), 1)
	return fsys
}

// activate makes fsys the active bundle over the API: uploaded by ops-ida
// and, when it waits for a second operator, approved by ops-jon.
func (e *env) activate(t *testing.T, fsys fstest.MapFS) {
	t.Helper()
	r := e.uploadAs(t, "", bytes.NewReader(packed(t, fsys)))
	switch r.status {
	case http.StatusCreated:
	case http.StatusAccepted:
		var awaiting struct{ Digest string }
		r.decode(t, &awaiting)
		e.call(t, http.MethodPost, "/v1/bundles/"+awaiting.Digest+"/approve", "ops-jon", nil).want(t, http.StatusCreated, "")
	default:
		t.Fatalf("upload: %d %s", r.status, r.body)
	}
}

// Only a lead approves or rejects, whatever the bundle's approver rules
// say: under a bundle whose rules accept rep-ana and ops-ida, neither can
// decide rep-ben's $300 refund, the queue says so, the resume pays
// nothing, and a lead of the region still can.
func TestApprovalRoleFloor(t *testing.T) {
	e := start(t, devstack.Options{})
	e.activate(t, approversBundle(t, "rep-ana", "ops-ida"))
	e.open(t, "rep-ben", "W-ben")
	r, s := e.propose(t, "rep-ben", "W-ben", "issue_refund", refund("O-1004", 30000))
	r.want(t, http.StatusAccepted, "")
	if s.Approval == nil {
		t.Fatalf("the $300 refund does not wait for an approval: %s", r.body)
	}
	id := s.Approval.ID

	for _, c := range []struct{ who, verb, code string }{
		{"rep-ana", "approve", "forbidden_role"},
		{"rep-ana", "reject", "forbidden_role"},
		{"ops-ida", "approve", "forbidden_role"},
		{"ops-ida", "reject", "forbidden_role"},
		{"rep-ben", "approve", "requester_cannot_approve"},
	} {
		t.Run(c.who+" "+c.verb+"s", func(t *testing.T) {
			e.call(t, http.MethodPost, "/v1/approvals/"+id+"/"+c.verb, c.who, map[string]string{"comment": "looks fine"}).
				want(t, http.StatusForbidden, c.code)
		})
	}
	if op := e.queue(t, "ops-ida", "?status=pending")[id]; op.CanApprove == nil || *op.CanApprove || op.Code != "forbidden_role" {
		t.Errorf("the operator's queue: can_approve %v code %q; want false forbidden_role", op.CanApprove, op.Code)
	}
	if w := e.resume(t, "rep-ben", "W-ben"); w.Steps[0].Status != "waiting_approval" {
		t.Errorf("after the refused attempts the step is %s, want waiting_approval", w.Steps[0].Status)
	}
	e.wantLedger(t, 0)

	var a approval
	e.call(t, http.MethodGet, "/v1/approvals/"+id, "lead-eli", nil).decode(t, &a)
	if a.Status != "pending" || a.Approver != "" {
		t.Fatalf("approval %+v after the refused attempts, want pending with no approver", a)
	}
	e.call(t, http.MethodPost, "/v1/approvals/"+id+"/approve", "lead-eli", nil).want(t, http.StatusOK, "")
	if w := e.resume(t, "rep-ben", "W-ben"); w.Steps[0].Status != "done" {
		t.Errorf("approved by lead-eli the step is %s, want done", w.Steps[0].Status)
	}
	if got := e.wantLedger(t, 1); got[0].Amount != 30000 || got[0].By != "rep-ben" {
		t.Errorf("ledger %+v, want rep-ben's $300", got)
	}
}

// The requester is the requester however her sub is spelled: a lead token
// for Rep-Ana (or its fullwidth form) is rep-ana, who cannot approve her
// own $120 refund, neither on the API nor in the queue's verdict.
func TestRequesterUnderAnotherSpelling(t *testing.T) {
	e := start(t, devstack.Options{})
	e.open(t, "rep-ana", "W-ana")
	r, s := e.propose(t, "rep-ana", "W-ana", "issue_refund", refund("O-1002", 12000))
	r.want(t, http.StatusAccepted, "")
	id := s.Approval.ID
	for _, sub := range []string{"Rep-Ana", "REP-ANA", "ＲＥＰ－ＡＮＡ"} {
		t.Run(sub, func(t *testing.T) {
			tok := e.sign(t, "lead-dee", sub, "lead")
			e.callWith(t, http.MethodPost, "/v1/approvals/"+id+"/approve", tok, nil).want(t, http.StatusForbidden, "requester_cannot_approve")
			var item queued
			e.callWith(t, http.MethodGet, "/v1/approvals/"+id, tok, nil).decode(t, &item)
			if item.CanApprove == nil || *item.CanApprove || item.Code != "requester_cannot_approve" {
				t.Errorf("as %s: can_approve %v code %q; want false requester_cannot_approve", sub, item.CanApprove, item.Code)
			}
		})
	}
	e.resume(t, "rep-ana", "W-ana")
	e.wantLedger(t, 0)
	// Her colleague of the region may.
	e.call(t, http.MethodPost, "/v1/approvals/"+id+"/approve", "lead-dee", nil).want(t, http.StatusOK, "")
}
