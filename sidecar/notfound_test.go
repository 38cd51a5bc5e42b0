package sidecar_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/countersign/countersign/cmd/devstack"
)

// To a rep, another rep's workflow and approval do not exist: every path
// answers exactly what it answers for an id nobody used (status, code and
// message, the id aside), so no answer tells her which ids are taken or
// whose they are.
func TestAnotherRepsRecordsAreNotFound(t *testing.T) {
	e := start(t, devstack.Options{})
	e.open(t, "rep-ana", "W-ana")
	r, s := e.propose(t, "rep-ana", "W-ana", "issue_refund", refund("O-1002", 12000))
	r.want(t, http.StatusAccepted, "")
	approvalID := s.Approval.ID
	step := map[string]any{"tool": "issue_refund", "args": refund("O-1004", 2000)}
	amend := map[string]any{"args": refund("O-1002", 48000)}

	for _, c := range []struct {
		name, method, path string // %s is the id
		body               any
		status             int
		code               string
		real, unknown      string
	}{
		{"read the workflow", http.MethodGet, "/v1/workflows/%s", nil, http.StatusNotFound, "not_found", "W-ana", "W-none"},
		{"wait for it", http.MethodGet, "/v1/workflows/%s?wait=1s", nil, http.StatusNotFound, "not_found", "W-ana", "W-none"},
		{"propose a step", http.MethodPost, "/v1/workflows/%s/steps", step, http.StatusNotFound, "not_found", "W-ana", "W-none"},
		{"amend its step", http.MethodPatch, "/v1/workflows/%s/steps/1", amend, http.StatusNotFound, "not_found", "W-ana", "W-none"},
		{"resume it", http.MethodPost, "/v1/workflows/%s/resume", nil, http.StatusNotFound, "not_found", "W-ana", "W-none"},
		{"read the approval", http.MethodGet, "/v1/approvals/%s", nil, http.StatusNotFound, "not_found", approvalID, "AP-9999"},
		{"approve it", http.MethodPost, "/v1/approvals/%s/approve", nil, http.StatusForbidden, "forbidden_role", approvalID, "AP-9999"},
		{"reject it", http.MethodPost, "/v1/approvals/%s/reject", nil, http.StatusForbidden, "forbidden_role", approvalID, "AP-9999"},
	} {
		t.Run(c.name, func(t *testing.T) {
			real := e.call(t, c.method, fmt.Sprintf(c.path, c.real), "rep-ben", c.body)
			unknown := e.call(t, c.method, fmt.Sprintf(c.path, c.unknown), "rep-ben", c.body)
			real.want(t, c.status, c.code)
			unknown.want(t, c.status, c.code)
			if got, want := sameShape(t, real, c.real), sameShape(t, unknown, c.unknown); got != want {
				t.Errorf("another rep's %s answers\n%s\nan unknown id\n%s", c.real, got, want)
			}
		})
	}
	// Her workflow is untouched, and her approval still hers to be decided.
	if w := e.getWorkflow(t, "rep-ana", "W-ana"); len(w.Steps) != 1 || w.Steps[0].Args["amount"] != float64(12000) ||
		w.Steps[0].Status != "waiting_approval" {
		t.Errorf("rep-ana's workflow after rep-ben's attempts: %+v", w)
	}

	// Opening a workflow under her id must fail, and says only that the id
	// is taken: not whose it is, nor for which ticket.
	taken := e.call(t, http.MethodPost, "/v1/workflows", "rep-ben", map[string]string{"id": "W-ana", "ticket": "T-W-ana"})
	taken.want(t, http.StatusConflict, "workflow_exists")
	if msg := taken.errorOf(t).Message; strings.Contains(msg, "user") || strings.Contains(msg, "ticket") || strings.Contains(msg, "rep-ana") {
		t.Errorf("opening another rep's id says %q: more than that the id is in use", msg)
	}
	// To its own rep the answer still says how the request differs.
	mine := e.call(t, http.MethodPost, "/v1/workflows", "rep-ana", map[string]string{"id": "W-ana", "ticket": "T-other"})
	mine.want(t, http.StatusConflict, "workflow_exists")
	if msg := mine.errorOf(t).Message; !strings.Contains(msg, "another ticket") {
		t.Errorf("rep-ana reopening W-ana for another ticket is told %q; want it to name the ticket", msg)
	}
}

// sameShape is an error answer with its request id dropped and the id it
// was asked about replaced by a placeholder: what two answers must share
// to say the same thing.
func sameShape(t *testing.T, r reply, id string) string {
	t.Helper()
	var body map[string]any
	if err := json.Unmarshal(r.body, &body); err != nil {
		t.Fatalf("%s: %v", r.body, err)
	}
	delete(body, "request_id")
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%d %s", r.status, strings.ReplaceAll(string(b), id, "{id}"))
}
