package sidecar_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/countersign/countersign/cmd/devstack"
)

// A JWT-shaped value: '.' is allowed in ids, so only its shape gives it away.
const jwtShaped = "eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJ4In0.c2ln"

// Ids, tickets and comments that break the contract or carry a token are
// refused with 422 when they arrive, not accepted and failed later.
func TestIdsTicketsAndCommentsAreCheckedOnArrival(t *testing.T) {
	e := start(t, devstack.Options{})
	for _, tc := range []struct{ name, id, ticket string }{
		{"an id shaped like a JWT", jwtShaped, "T-1"},
		{"a ticket shaped like a JWT", "W-jwt-ticket", jwtShaped},
		{"an id over 64 characters", strings.Repeat("W", 65), "T-1"},
		{"a ticket with a space", "W-space", "T 1"},
		{"a ticket with a newline", "W-newline", "T-1\nINFO forged"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.call(t, http.MethodPost, "/v1/workflows", "rep-ana", map[string]string{"id": tc.id, "ticket": tc.ticket})
			r.want(t, http.StatusUnprocessableEntity, "invalid_request")
			e.call(t, http.MethodGet, "/v1/workflows/"+tc.id, "rep-ana", nil).want(t, http.StatusNotFound, "not_found")
		})
	}

	e.open(t, "rep-ana", "W.dotted_id-1")
	r, s := e.propose(t, "rep-ana", "W.dotted_id-1", "issue_refund", refund("O-1002", 12000))
	r.want(t, http.StatusAccepted, "")
	approvals := "/v1/approvals/" + s.Approval.ID
	for _, tc := range []struct{ name, action, comment string }{
		{"an approval comment shaped like a JWT", "/approve", "ok, token " + jwtShaped},
		{"an approval comment over 1,000 bytes", "/approve", strings.Repeat("x", 1001)},
		{"an approval comment with a newline", "/approve", "ok\nINFO approved by ops-ida"},
		{"a rejection comment with an escape sequence", "/reject", "no \x1b[2J"},
		{"a rejection comment shaped like a JWT", "/reject", jwtShaped},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.call(t, http.MethodPost, approvals+tc.action, "lead-dee", map[string]string{"comment": tc.comment}).
				want(t, http.StatusUnprocessableEntity, "invalid_request")
		})
	}
	var a approval
	e.call(t, http.MethodPost, approvals+"/approve", "lead-dee", map[string]string{"comment": strings.Repeat("ok ", 333)}).decode(t, &a)
	if a.Status != "approved" {
		t.Fatalf("a plain comment of 999 bytes: approval %+v", a)
	}
	if w := e.resume(t, "rep-ana", "W.dotted_id-1"); w.Steps[0].Status != "done" {
		t.Fatalf("the workflow with a dotted id: step %s, want done", w.Steps[0].Status)
	}
	e.call(t, http.MethodPost, "/v1/workflows/W.dotted_id-1/steps/1/reverse", "lead-dee", map[string]string{"comment": jwtShaped}).
		want(t, http.StatusUnprocessableEntity, "invalid_request")
	e.wantLedger(t, 1)
}
