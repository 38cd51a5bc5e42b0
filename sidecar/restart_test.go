package sidecar_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	"github.com/countersign/countersign/cmd/devstack"
)

// An approval that arrives after a restart is honoured, and the refund
// happens once however often the workflow is resumed.
func TestApprovalAfterRestart(t *testing.T) {
	dir := t.TempDir()
	first := start(t, devstack.Options{DataDir: dir})
	first.open(t, "rep-ana", "W-restart")
	r, s := first.propose(t, "rep-ana", "W-restart", "issue_refund", refund("O-1002", 12000))
	r.want(t, http.StatusAccepted, "")
	if s.Approval == nil {
		t.Fatalf("no approval on %s", r.body)
	}
	if err := first.st.Close(); err != nil {
		t.Fatalf("closing the first stack: %v", err)
	}

	e := start(t, devstack.Options{DataDir: dir})
	if w := e.getWorkflow(t, "rep-ana", "W-restart"); w.Status != "waiting_approval" || len(w.Steps) != 1 {
		t.Fatalf("after restart workflow is %s with %d steps, want waiting_approval with 1", w.Status, len(w.Steps))
	}
	var pending struct{ Approvals []approval }
	e.call(t, http.MethodGet, "/v1/approvals?status=pending", "lead-dee", nil).decode(t, &pending)
	if len(pending.Approvals) != 1 || pending.Approvals[0].ID != s.Approval.ID {
		t.Fatalf("pending approvals %+v, want only %s", pending.Approvals, s.Approval.ID)
	}
	e.call(t, http.MethodPost, "/v1/approvals/"+s.Approval.ID+"/approve", "lead-dee", nil).want(t, http.StatusOK, "")

	var key string
	for i := range 2 {
		w := e.resume(t, "rep-ana", "W-restart")
		if w.Status != "done" || w.Steps[0].Status != "done" {
			t.Fatalf("resume %d: workflow %s step %s, want both done", i+1, w.Status, w.Steps[0].Status)
		}
		var res entry
		if err := json.Unmarshal(w.Steps[0].Result, &res); err != nil || res.Key == "" {
			t.Fatalf("step result %s has no ledger key", w.Steps[0].Result)
		}
		key = res.Key
		if got := e.wantLedger(t, 1); got[0].Key != key || got[0].Amount != 12000 {
			t.Fatalf("ledger %+v, want one $120 entry with key %s", got, key)
		}
	}
	res, err := e.client.Get(e.st.Endpoints.Ledger + "/refunds?key=" + url.QueryEscape(key))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Errorf("ledger lookup by key: %d, want 200", res.StatusCode)
	}
	var used approval
	e.call(t, http.MethodGet, "/v1/approvals/"+s.Approval.ID, "lead-dee", nil).decode(t, &used)
	if used.Status != "used" {
		t.Errorf("approval status %q after execution, want used", used.Status)
	}
}
