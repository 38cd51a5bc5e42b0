package sidecar_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/countersign/countersign/cmd/devstack"
)

// A response lost after the ledger committed is retried with the same key,
// and the ledger replays it: one refund.
func TestLostResponseRetried(t *testing.T) {
	e := start(t, devstack.Options{})
	faults := e.st.Endpoints.Ledger + "/_sim/faults"
	e.sim(t, http.MethodPut, faults, map[string]int{"lose_response": 1}, http.StatusOK)
	e.open(t, "rep-ana", "W-lost")
	r, s := e.propose(t, "rep-ana", "W-lost", "issue_refund", refund("O-1001", 3000))
	r.want(t, http.StatusOK, "")
	if s.Status != "done" {
		t.Errorf("step %s, want done", r.body)
	}
	var left struct {
		LoseResponse int `json:"lose_response"`
	}
	json.Unmarshal(e.sim(t, http.MethodGet, faults, nil, http.StatusOK), &left)
	if left.LoseResponse != 0 {
		t.Fatalf("the fault did not fire: %d left", left.LoseResponse)
	}
	e.wantLedger(t, 1)
}

// An order-system response lost after the shipment was made leaves the
// step unknown; resume resolves it by the shipment count against the
// baseline instead of shipping twice.
func TestLostShipmentResolved(t *testing.T) {
	e := start(t, devstack.Options{})
	e.sim(t, http.MethodPut, e.st.Endpoints.Orders+"/_sim/faults", map[string]int{"lose_response": 1}, http.StatusOK)
	e.open(t, "rep-ana", "W-ship")
	r, s := e.propose(t, "rep-ana", "W-ship", "reship_order", map[string]string{"order": "O-1001"})
	r.want(t, http.StatusAccepted, "")
	if s.Status != "unknown" {
		t.Fatalf("step %s, want unknown", r.body)
	}
	if w := e.getWorkflow(t, "rep-ana", "W-ship"); w.Status != "needs_reconciliation" {
		t.Errorf("workflow %s, want needs_reconciliation", w.Status)
	}
	for i := range 2 {
		if w := e.resume(t, "rep-ana", "W-ship"); w.Status != "done" || w.Steps[0].Status != "done" {
			t.Errorf("resume %d: workflow %s step %s, want done", i+1, w.Status, w.Steps[0].Status)
		}
		var sh struct{ Shipments []json.RawMessage }
		json.Unmarshal(e.sim(t, http.MethodGet, e.st.Endpoints.Orders+"/orders/O-1001/shipments", nil, http.StatusOK), &sh)
		if len(sh.Shipments) != 1 {
			t.Fatalf("resume %d: %d shipments, want 1", i+1, len(sh.Shipments))
		}
	}
}
