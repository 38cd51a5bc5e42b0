package mcpfront_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/cmd/devstack"
	"github.com/countersign/countersign/sidecar/client"
	"github.com/countersign/countersign/sidecar/mcpfront"
)

// One MCP session handles two tickets by naming each call's workflow in
// its arguments: each ticket gets its own workflow, a later call for the
// same ticket works in it again, countersign_status and countersign_wait
// find each by ticket or by id, and /v1 gets the tool's arguments
// without workflow and ticket (it would refuse them as unknown fields).
func TestMCPOneSessionManyTickets(t *testing.T) {
	st := start(t, devstack.Options{})
	ctx := context.Background()
	cs := connect(t, st, "rep-ana", nil) // no workflow headers

	var a1, b1, a2 client.Step
	structured(t, call(t, cs, "issue_refund", map[string]any{"order": "O-1001", "amount": 3000, "ticket": "T-A"}), &a1)
	const because = "the customer says the parcel arrived crushed"
	res := call(t, cs, "issue_refund", map[string]any{"order": "O-1002", "amount": 12000, "workflow": "W-B", "ticket": "T-B", "reason": because})
	structured(t, res, &b1)
	if b1.AgentReason != because || b1.Reason == nil {
		t.Errorf("the step's agent_reason %q and reason %+v: want the agent's words and countersign's reason", b1.AgentReason, b1.Reason)
	}
	structured(t, call(t, cs, "lookup_order", map[string]any{"order": "O-1001", "ticket": "T-A"}), &a2)
	if a1.Status != client.StepDone || a1.Workflow == "" || a1.Workflow == "W-B" || a2.Workflow != a1.Workflow || a2.N != 2 {
		t.Errorf("ticket T-A: steps %s/%d %s and %s/%d, want both in one workflow, the refund done", a1.Workflow, a1.N, a1.Status, a2.Workflow, a2.N)
	}
	if b1.Workflow != "W-B" || b1.N != 1 || b1.Status != client.StepWaitingApproval || b1.Approval == nil {
		t.Fatalf("ticket T-B: %s", resultText(res))
	}
	if b1.Args.Order != "O-1002" || b1.Args.Amount == nil || *b1.Args.Amount != 12000 {
		t.Errorf("the step's args %+v, want the refund's own", b1.Args)
	}

	api := apiClient(t, st, "rep-ana")
	for id, ticket := range map[string]string{a1.Workflow: "T-A", "W-B": "T-B"} {
		if w, err := api.Workflow(ctx, id); err != nil || w.Ticket != ticket {
			t.Errorf("the API's workflow %s: %+v, %v; want ticket %s", id, w, err, ticket)
		}
	}

	// Status by ticket and by id, each the workflow it names.
	for _, c := range []struct {
		args  map[string]any
		id    string
		steps int
	}{
		{map[string]any{"ticket": "T-A"}, a1.Workflow, 2},
		{map[string]any{"workflow": "W-B"}, "W-B", 1},
		{map[string]any{"workflow": "W-B", "ticket": "T-B"}, "W-B", 1},
		{map[string]any{"workflow": a1.Workflow}, a1.Workflow, 2},
	} {
		var w client.Workflow
		res := call(t, cs, "countersign_status", c.args)
		structured(t, res, &w)
		if res.IsError || w.ID != c.id || len(w.Steps) != c.steps {
			t.Errorf("countersign_status %v: %s; want %s with %d steps", c.args, resultText(res), c.id, c.steps)
		}
	}

	// A lead approves T-B's refund; the wait named by the workflow resumes
	// that workflow, and the other stays as it was.
	if _, err := apiClient(t, st, "lead-dee").Approve(ctx, b1.Approval.ID, "ok"); err != nil {
		t.Fatal(err)
	}
	var w client.Workflow
	res = call(t, cs, "countersign_wait", map[string]any{"workflow": "W-B", "timeout_seconds": 5})
	structured(t, res, &w)
	if res.IsError || w.ID != "W-B" || w.Status != client.WorkflowDone || w.Steps[0].Status != client.StepDone {
		t.Errorf("countersign_wait on W-B: %s", resultText(res))
	}
	if got := ledgerEntries(t, st); len(got) != 2 {
		t.Errorf("ledger %+v, want the two refunds", got)
	}

	// The same session still has its own default: with no names, a call
	// opens a third workflow, ticket mcp-<session id>.
	var own client.Step
	structured(t, call(t, cs, "lookup_order", map[string]any{"order": "O-1001"}), &own)
	if own.Workflow == a1.Workflow || own.Workflow == "W-B" {
		t.Errorf("a call naming nothing went to %s", own.Workflow)
	}
}

// countersign_status and countersign_wait never create a workflow: a
// workflow that does not exist, a ticket the session has not worked for,
// or a fresh session with nothing opened is not_found, and the rep has
// no more workflows than before.
func TestMCPStatusCreatesNothing(t *testing.T) {
	st := start(t, devstack.Options{})
	ctx := context.Background()
	api := apiClient(t, st, "rep-ana")
	count := func() int {
		t.Helper()
		page, err := api.Workflows(ctx, client.WorkflowQuery{})
		if err != nil {
			t.Fatal(err)
		}
		return len(page.Workflows)
	}
	cs := connect(t, st, "rep-ana", nil)
	named := connect(t, st, "rep-ana", workflowHeaders("W-header", "T-header"))
	before := count()
	for _, c := range []struct {
		name string
		tool string
		args map[string]any
	}{
		{"status in a fresh session", "countersign_status", nil},
		{"wait in a fresh session", "countersign_wait", map[string]any{"timeout_seconds": 1}},
		{"status of an unknown workflow", "countersign_status", map[string]any{"workflow": "W-none"}},
		{"status of an unknown workflow with a ticket", "countersign_status", map[string]any{"workflow": "W-none", "ticket": "T-none"}},
		{"wait on an unknown workflow", "countersign_wait", map[string]any{"workflow": "W-none", "timeout_seconds": 1}},
		{"status of a ticket not worked for", "countersign_status", map[string]any{"ticket": "T-none"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if e := apiErrorOf(t, call(t, cs, c.tool, c.args)); e.Status != http.StatusNotFound || e.Code != "not_found" {
				t.Errorf("%d %s %q, want 404 not_found", e.Status, e.Code, e.Message)
			}
		})
	}
	t.Run("status of the headers' workflow before any call", func(t *testing.T) {
		if e := apiErrorOf(t, call(t, named, "countersign_status", nil)); e.Code != "not_found" {
			t.Errorf("%d %s %q, want not_found", e.Status, e.Code, e.Message)
		}
	})
	if n := count(); n != before {
		t.Errorf("the rep has %d workflows, %d before: status or wait created one", n, before)
	}
	if _, err := api.Workflow(ctx, "W-none"); !isNotFound(err) {
		t.Errorf("W-none: %v, want not_found", err)
	}
}

// The arguments the front owns are checked as the API checks its own: a
// workflow that is not a string, or a case variant of the name, is refused
// and nothing is opened; a workflow named with another ticket than its
// own is the API's conflict.
func TestMCPWorkflowArgumentsRefused(t *testing.T) {
	st := start(t, devstack.Options{})
	cs := connect(t, st, "rep-ana", nil)
	var first client.Step
	structured(t, call(t, cs, "lookup_order", map[string]any{"order": "O-1001", "workflow": "W-1", "ticket": "T-1"}), &first)
	for _, c := range []struct {
		name   string
		tool   string
		args   any
		status int
		code   string
	}{
		{"a workflow that is a number", "lookup_order", map[string]any{"order": "O-1001", "workflow": 7}, http.StatusUnprocessableEntity, "invalid_request"},
		{"a case variant of workflow", "lookup_order", jsonRaw(`{"order":"O-1001","Workflow":"W-1"}`), http.StatusBadRequest, "malformed_json"},
		{"a status argument it does not know", "countersign_status", map[string]any{"workflw": "W-1"}, http.StatusUnprocessableEntity, "invalid_request"},
		{"another ticket on an opened workflow", "lookup_order", map[string]any{"order": "O-1001", "workflow": "W-1", "ticket": "T-2"}, http.StatusConflict, "workflow_exists"},
		{"status with another ticket", "countersign_status", map[string]any{"workflow": "W-1", "ticket": "T-2"}, http.StatusConflict, "workflow_exists"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := apiErrorOf(t, call(t, cs, c.tool, c.args))
			if e.Status != c.status || e.Code != c.code {
				t.Errorf("%d %s %q, want %d %s", e.Status, e.Code, e.Message, c.status, c.code)
			}
		})
	}
	w, err := apiClient(t, st, "rep-ana").Workflow(context.Background(), "W-1")
	if err != nil || len(w.Steps) != 1 {
		t.Errorf("W-1: %+v, %v; want its one step", w, err)
	}
	if first.Workflow != "W-1" {
		t.Errorf("first step in %s, want W-1", first.Workflow)
	}
}

func isNotFound(err error) bool {
	var ae *client.Error
	return errors.As(err, &ae) && ae.Code == "not_found"
}

// requestLog records the method and path of every request a client sends.
type requestLog struct {
	mu   sync.Mutex
	sent []string
}

func (l *requestLog) RoundTrip(r *http.Request) (*http.Response, error) {
	l.mu.Lock()
	l.sent = append(l.sent, r.Method+" "+r.URL.Path)
	l.mu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

func (l *requestLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.sent
	l.sent = nil
	return out
}

// A governed call for a ticket the session has no workflow for is one
// request to the API, which opens the workflow with the step; the next
// call for the ticket is one request into the same workflow.
func TestMCPCallOpensItsWorkflowInOneRequest(t *testing.T) {
	st := start(t, devstack.Options{})
	ctx := context.Background()
	log := &requestLog{}
	c, err := client.New(st.Endpoints.Sidecar, st.Tokens["rep-ana"], client.Strict(), client.WithHTTPClient(&http.Client{Transport: log}))
	if err != nil {
		t.Fatal(err)
	}
	catalog, err := c.Tools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	log.take()
	srv := mcpfront.NewServer(mcpfront.Config{Catalog: catalog, Client: func(*mcp.CallToolRequest) (*client.Client, error) { return c, nil }})
	ct, stt := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, stt, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(); ss.Wait() })

	var first, second client.Step
	structured(t, call(t, cs, "issue_refund", map[string]any{"ticket": "T-one", "order": "O-1002", "amount": 100}), &first)
	sent := log.take()
	if len(sent) != 1 || !strings.HasSuffix(sent[0], "/steps") || first.Status != client.StepDone {
		t.Fatalf("the first call sent %v and answered %s step %d; want one POST .../steps, done", sent, first.Status, first.N)
	}
	structured(t, call(t, cs, "issue_refund", map[string]any{"ticket": "T-one", "order": "O-1002", "amount": 200}), &second)
	if sent := log.take(); len(sent) != 1 || second.Workflow != first.Workflow || second.N != 2 {
		t.Errorf("the second call sent %v and answered step %d of %s; want one request, step 2 of %s", sent, second.N, second.Workflow, first.Workflow)
	}
	w, err := apiClient(t, st, "rep-ana").Workflow(ctx, first.Workflow)
	if err != nil || w.Ticket != "T-one" || len(w.Steps) != 2 {
		t.Errorf("workflow %+v, %v; want ticket T-one with two steps", w, err)
	}
}
