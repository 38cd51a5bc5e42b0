package sidecar_test

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/countersign/countersign/cmd/devstack"
	"github.com/countersign/countersign/executor/engine"
)

// openAndPropose is POST /v1/workflows/{wf}/steps with the fields that
// open the workflow: one request per governed call.
func (e *env) openAndPropose(t *testing.T, who, wf string, body map[string]any) (reply, step) {
	t.Helper()
	r := e.call(t, http.MethodPost, "/v1/workflows/"+wf+"/steps", who, body)
	var s step
	if r.status != 0 && r.status < 300 {
		r.decode(t, &s)
	}
	return r, s
}

// A proposal with a ticket opens the workflow it names, and the same
// request again is a duplicate call in it: one refund.
func TestOpenAndProposeInOneRequest(t *testing.T) {
	e := start(t, devstack.Options{})
	body := map[string]any{"ticket": "T-one", "tool": "issue_refund", "args": refund("O-1001", 500)}
	r, s := e.openAndPropose(t, "rep-ana", "W-one", body)
	r.want(t, http.StatusOK, "")
	if s.Status != "done" || s.N != 1 {
		t.Fatalf("first request: step %s, want step 1 done", r.body)
	}
	w := e.getWorkflow(t, "rep-ana", "W-one")
	if w.Ticket != "T-one" || w.User != "rep-ana" || len(w.Steps) != 1 || w.Status != "done" {
		t.Fatalf("workflow %+v, want rep-ana's, ticket T-one, done with its one step", w)
	}

	r, s = e.openAndPropose(t, "rep-ana", "W-one", body)
	r.want(t, http.StatusOK, "")
	if s.Status != "suppressed" || s.DuplicateOf != 1 {
		t.Errorf("the retry: step %s, want suppressed as a duplicate of step 1", r.body)
	}
	e.wantLedger(t, 1)

	// Opened apart first, the same fields propose into it.
	e.open(t, "rep-ana", "W-apart")
	r, s = e.openAndPropose(t, "rep-ana", "W-apart", map[string]any{"ticket": "T-W-apart", "tool": "issue_refund", "args": refund("O-1001", 600)})
	r.want(t, http.StatusOK, "")
	if s.Status != "done" || s.N != 1 {
		t.Errorf("into a workflow opened apart: step %s, want step 1 done", r.body)
	}
}

// An id in use answers 409 workflow_exists to a request that would open
// it otherwise than it was opened, or for another rep; nothing is added.
// Without a ticket, a workflow that does not exist is still not found.
func TestOpenAndProposeRefusals(t *testing.T) {
	e := start(t, devstack.Options{})
	e.openAndPropose(t, "rep-ana", "W-taken", map[string]any{"ticket": "T-taken", "agent_version": "v1",
		"bounds": map[string]any{"max_steps": 3}, "tool": "lookup_order", "args": map[string]any{"order": "O-1001"}})
	call := map[string]any{"tool": "issue_refund", "args": refund("O-1001", 500)}
	with := func(fields map[string]any) map[string]any {
		out := map[string]any{}
		for k, v := range call {
			out[k] = v
		}
		for k, v := range fields {
			out[k] = v
		}
		return out
	}
	cases := []struct {
		name   string
		who    string
		wf     string
		body   map[string]any
		status int
		code   string
	}{
		{"another ticket is a conflict", "rep-ana", "W-taken",
			with(map[string]any{"ticket": "T-other", "agent_version": "v1", "bounds": map[string]any{"max_steps": 3}}), http.StatusConflict, "workflow_exists"},
		{"another agent version is a conflict", "rep-ana", "W-taken",
			with(map[string]any{"ticket": "T-taken", "agent_version": "v2", "bounds": map[string]any{"max_steps": 3}}), http.StatusConflict, "workflow_exists"},
		{"other bounds are a conflict", "rep-ana", "W-taken",
			with(map[string]any{"ticket": "T-taken", "agent_version": "v1", "bounds": map[string]any{"max_steps": 2}}), http.StatusConflict, "workflow_exists"},
		{"another rep cannot open into the id", "rep-ben", "W-taken",
			with(map[string]any{"ticket": "T-taken", "agent_version": "v1", "bounds": map[string]any{"max_steps": 3}}), http.StatusConflict, "workflow_exists"},
		{"another rep without a ticket finds nothing", "rep-ben", "W-taken", call, http.StatusNotFound, "not_found"},
		{"without a ticket a missing workflow is not found", "rep-ana", "W-missing", call, http.StatusNotFound, "not_found"},
		{"an agent version without a ticket is refused", "rep-ana", "W-missing",
			with(map[string]any{"agent_version": "v1"}), http.StatusUnprocessableEntity, "invalid_request"},
		{"an unknown field is refused", "rep-ana", "W-missing",
			with(map[string]any{"ticket": "T-missing", "tiket": "T-missing"}), http.StatusUnprocessableEntity, "invalid_request"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, _ := e.openAndPropose(t, c.who, c.wf, c.body)
			r.want(t, c.status, c.code)
		})
	}
	w := e.getWorkflow(t, "rep-ana", "W-taken")
	if len(w.Steps) != 1 || w.Ticket != "T-taken" || w.User != "rep-ana" {
		t.Errorf("W-taken after the refusals: %+v, want rep-ana's first step alone", w)
	}
	if r := e.call(t, http.MethodGet, "/v1/workflows/W-missing", "rep-ana", nil); r.status != http.StatusNotFound {
		t.Errorf("W-missing: status %d, want 404: a refused request opens nothing", r.status)
	}
	e.wantLedger(t, 0)
}

// A crash after the workflow is written and before its first step is
// commits neither: the workflow is not there, and the same request later
// opens it with its step 1.
func TestOpenAndProposeCommitsTogether(t *testing.T) {
	var armed atomic.Bool
	armed.Store(true)
	e := start(t, devstack.Options{Failpoint: func(point string) error {
		if point == "after_open" && armed.Load() {
			return engine.ErrCrashed
		}
		return nil
	}})
	body := map[string]any{"ticket": "T-crash", "tool": "issue_refund", "args": refund("O-1001", 500)}
	if r, _ := e.openAndPropose(t, "rep-ana", "W-crash", body); r.status < 500 {
		t.Fatalf("crashed at after_open: status %d, want a 5xx; body %s", r.status, r.body)
	}
	if r := e.call(t, http.MethodGet, "/v1/workflows/W-crash", "rep-ana", nil); r.status != http.StatusNotFound {
		t.Fatalf("after the crash: workflow status %d, want 404 (a workflow without its step); body %s", r.status, r.body)
	}
	if ids, _ := e.listAll(t, "rep-ana", nil); len(ids) != 0 {
		t.Errorf("after the crash the list holds %v, want nothing", ids)
	}
	e.wantLedger(t, 0)

	armed.Store(false)
	r, s := e.openAndPropose(t, "rep-ana", "W-crash", body)
	r.want(t, http.StatusOK, "")
	if s.Status != "done" || s.N != 1 {
		t.Errorf("after the crash: step %s, want step 1 done", r.body)
	}
	e.wantLedger(t, 1)
}

// A proposal that would have opened its workflow and breaks the tool's
// schema counts against the breaker of the agent version it declares, as
// it would have in a workflow opened apart: opening in the same request
// is no way around the breaker.
func TestOpenAndProposeSchemaFailuresTripTheBreaker(t *testing.T) {
	e := start(t, devstack.Options{})
	for i := range 5 {
		r, _ := e.openAndPropose(t, "rep-ana", fmt.Sprintf("W-schema-%d", i), map[string]any{"ticket": "T-schema", "agent_version": "v3",
			"tool": "issue_refund", "args": map[string]any{"order": "O-1001", "amount": "ten"}})
		r.want(t, http.StatusUnprocessableEntity, "invalid_args")
	}
	m := e.mode(t, "issue_refund")
	if len(m.Breakers) != 1 || !m.Breakers[0].Tripped || m.Breakers[0].AgentVersion != "v3" {
		t.Fatalf("breakers after five schema failures of v3: %+v, want v3 tripped", m.Breakers)
	}
	if r := e.call(t, http.MethodGet, "/v1/workflows/W-schema-0", "rep-ana", nil); r.status != http.StatusNotFound {
		t.Errorf("W-schema-0: status %d, want 404: a refused proposal opens nothing", r.status)
	}
}
