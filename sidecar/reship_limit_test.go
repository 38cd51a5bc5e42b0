package sidecar_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/countersign/countersign/cmd/devstack"
)

// An order's reships are counted across workflows: rep-ben's agent
// reships O-1003 ($80, under the reship approval value) in one workflow
// after another. The first ships; the second waits for a lead (R10) and
// ships once approved; a third is denied (R11); the order shipped twice.
func TestReshipsOfOneOrderAcrossWorkflows(t *testing.T) {
	e := start(t, devstack.Options{})
	reship := map[string]string{"order": "O-1003"}

	e.open(t, "rep-ben", "W-first")
	r, s := e.propose(t, "rep-ben", "W-first", "reship_order", reship)
	r.want(t, http.StatusOK, "")
	if s.Status != "done" {
		t.Fatalf("first reship: %s (%s), want done", s.Status, s.Rule)
	}

	e.open(t, "rep-ben", "W-second")
	r, s = e.propose(t, "rep-ben", "W-second", "reship_order", reship)
	r.want(t, http.StatusAccepted, "")
	if s.Status != "waiting_approval" || s.Rule != "R10-order-already-reshipped" || s.Approval == nil {
		t.Fatalf("second reship: %s by %s, want waiting_approval by R10-order-already-reshipped", s.Status, s.Rule)
	}
	e.call(t, http.MethodPost, "/v1/approvals/"+s.Approval.ID+"/approve", "lead-eli", nil).want(t, http.StatusOK, "")
	if w := e.resume(t, "rep-ben", "W-second"); w.Steps[0].Status != "done" {
		t.Fatalf("second reship after approval: %s, want done", w.Steps[0].Status)
	}

	for _, wf := range []string{"W-third", "W-fourth"} {
		e.open(t, "rep-ben", wf)
		r, s = e.propose(t, "rep-ben", wf, "reship_order", reship)
		r.want(t, http.StatusForbidden, "")
		if s.Status != "denied" || s.Rule != "R11-reship-limit" {
			t.Fatalf("reship in %s: %s by %s, want denied by R11-reship-limit", wf, s.Status, s.Rule)
		}
	}

	var got struct {
		Shipments []json.RawMessage `json:"shipments"`
	}
	if err := json.Unmarshal(e.sim(t, http.MethodGet, e.st.Endpoints.Orders+"/orders/O-1003/shipments", nil, http.StatusOK), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Shipments) != 2 {
		t.Fatalf("O-1003 has %d shipments, want 2 (the first, and the second a lead approved)", len(got.Shipments))
	}
}
