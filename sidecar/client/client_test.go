package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/cmd/devstack"
	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/sidecar/client"
)

// start brings up a dev stack on loopback and returns a strict client for
// each fixture person.
func start(t *testing.T) (*devstack.Stack, func(who string) *client.Client) {
	t.Helper()
	return startWith(t, devstack.Options{DataDir: t.TempDir()})
}

// startWith is start with the stack's options (a store on PostgreSQL).
func startWith(t *testing.T, o devstack.Options) (*devstack.Stack, func(who string) *client.Client) {
	t.Helper()
	st, err := devstack.Start(context.Background(), o)
	if err != nil {
		t.Fatalf("devstack.Start: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st, func(who string) *client.Client {
		t.Helper()
		c, err := client.New(st.Endpoints.Sidecar, st.Tokens[who], client.Strict())
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
}

// apiError fails the test unless err is an *Error with status and code.
func apiError(t *testing.T, err error, status int, code string) *client.Error {
	t.Helper()
	var ae *client.Error
	if !errors.As(err, &ae) {
		t.Fatalf("error %v (%T), want an *client.Error %d %s", err, err, status, code)
	}
	if ae.Status != status || ae.Code != code || ae.Message == "" || ae.RequestID == "" {
		t.Fatalf("error %+v, want %d %s with a message and a request id", ae, status, code)
	}
	return ae
}

// An approval's whole path through the client, every answer decoded
// strictly: a refund waits, the lead sees and approves it, the resume pays
// it, and the operator's audit check holds.
func TestApprovalPath(t *testing.T) {
	_, as := start(t)
	ctx := context.Background()
	rep, lead := as("rep-ana"), as("lead-dee")

	tools, err := rep.Tools(ctx)
	if err != nil || len(tools) != 3 || len(tools[0].InputSchema) == 0 {
		t.Fatalf("tools %+v, %v", tools, err)
	}
	w, created, err := rep.CreateWorkflow(ctx, client.NewWorkflow{ID: "W1", Ticket: "T-1"})
	if err != nil || !created || w.Status != client.WorkflowRunning || w.Steps != nil {
		t.Fatalf("created %+v %v %v", w, created, err)
	}
	if _, created, err = rep.CreateWorkflow(ctx, client.NewWorkflow{ID: "W1", Ticket: "T-1"}); err != nil || created {
		t.Errorf("opening W1 again: created %v, %v; want the existing one", created, err)
	}
	const because = "the customer says the parcel arrived crushed"
	step, err := rep.ProposeStepWithReason(ctx, "W1", "issue_refund", map[string]any{"order": "O-1002", "amount": 12000}, because)
	if err != nil || step.Status != client.StepWaitingApproval || step.Approval == nil || *step.Args.Amount != money.Cents(12000) ||
		step.AgentReason != because || step.Reason == nil || step.Reason.Next == "" {
		t.Fatalf("step %+v, %v; want waiting, with the agent's reason and countersign's", step, err)
	}
	id := step.Approval.ID

	queue, err := lead.Approvals(ctx, client.ApprovalQuery{Status: client.ApprovalPending})
	i := slices.IndexFunc(queue, func(a client.Approval) bool { return a.ID == id })
	if err != nil || i < 0 {
		t.Fatalf("lead-dee's queue %+v, %v; want %s", queue, err, id)
	}
	if q := queue[i]; q.CanApprove == nil || !*q.CanApprove || q.Rule != "R7-refund-needs-approval" || q.Ticket != "T-1" || q.OrderRefunded == nil || q.AgentReason != because {
		t.Errorf("queue item %+v: want can_approve, the rule, the ticket and the refunds made", q)
	}
	if asked, err := lead.Approvals(ctx, client.ApprovalQuery{Requester: "REP-ANA"}); err != nil || len(asked) != 1 || asked[0].ID != id {
		t.Errorf("what rep-ana asked for, named in capitals: %+v, %v; want %s", asked, err, id)
	}
	if other, err := lead.Approvals(ctx, client.ApprovalQuery{Requester: "rep-ben"}); err != nil || len(other) != 0 {
		t.Errorf("what rep-ben asked for: %+v, %v; want none", other, err)
	}
	if mine, err := as("lead-eli").Approvals(ctx, client.ApprovalQuery{Status: client.ApprovalPending}); err != nil || len(mine) != 0 {
		t.Errorf("lead-eli (another region) sees %+v, %v by default", mine, err)
	}
	all, err := as("lead-eli").Approvals(ctx, client.ApprovalQuery{Status: client.ApprovalPending, All: true})
	if err != nil || len(all) != 1 || all[0].CanApprove == nil || *all[0].CanApprove || all[0].Code != "approver_outside_region" {
		t.Errorf("lead-eli's whole queue %+v, %v", all, err)
	}
	a, err := lead.Approval(ctx, id)
	if err != nil || a.Requester != "rep-ana" || a.CallHash == "" {
		t.Fatalf("approval %+v, %v", a, err)
	}
	_, err = rep.Approve(ctx, id, "")
	apiError(t, err, http.StatusForbidden, "requester_cannot_approve")
	if a, err = lead.Approve(ctx, id, "damaged in transit"); err != nil || a.Status != client.ApprovalApproved || a.Approver != "lead-dee" || a.CanApprove != nil {
		t.Fatalf("approve: %+v, %v", a, err)
	}
	_, err = lead.Reject(ctx, id, "")
	apiError(t, err, http.StatusConflict, "not_pending")

	w, err = rep.Resume(ctx, "W1")
	if err != nil || w.Status != client.WorkflowDone || w.Steps[0].Status != client.StepDone {
		t.Fatalf("resume: %+v, %v", w, err)
	}
	if got, err := rep.Workflow(ctx, "W1"); err != nil || len(got.Steps) != 1 || got.Steps[0].Approval.Status != client.ApprovalUsed {
		t.Errorf("workflow %+v, %v", got, err)
	}
	v, err := as("ops-ida").VerifyAudit(ctx)
	if err != nil || !v.OK || v.Records == 0 {
		t.Errorf("audit verify %+v, %v", v, err)
	}
}

// Amending a step that has not started, and the conflict once it has.
func TestAmendStep(t *testing.T) {
	_, as := start(t)
	ctx := context.Background()
	rep := as("rep-ana")
	if _, _, err := rep.CreateWorkflow(ctx, client.NewWorkflow{ID: "W3", Ticket: "T-3"}); err != nil {
		t.Fatal(err)
	}
	if _, err := rep.ProposeStep(ctx, "W3", "issue_refund", map[string]any{"order": "O-1002", "amount": 12000}); err != nil {
		t.Fatal(err)
	}
	st, err := rep.AmendStep(ctx, "W3", 1, map[string]any{"order": "O-1002", "amount": 4500})
	if err != nil || *st.Args.Amount != 4500 {
		t.Fatalf("amend: %+v, %v", st, err)
	}
	if _, err := rep.Resume(ctx, "W3"); err != nil {
		t.Fatal(err)
	}
	_, err = rep.AmendStep(ctx, "W3", 1, map[string]any{"order": "O-1002", "amount": 4000})
	apiError(t, err, http.StatusConflict, "step_not_amendable")
}

// A denied step is answered as the step, with its error, and as the typed
// error; every other refusal as the typed error alone.
func TestErrorsAreTyped(t *testing.T) {
	st, as := start(t)
	ctx := context.Background()
	rep := as("rep-ana")
	if _, _, err := rep.CreateWorkflow(ctx, client.NewWorkflow{ID: "W2", Ticket: "T-2"}); err != nil {
		t.Fatal(err)
	}
	step, err := rep.ProposeStep(ctx, "W2", "issue_refund", map[string]any{"order": "O-1002", "amount": 60000})
	ae := apiError(t, err, http.StatusForbidden, "policy_denied")
	if ae.Rule != "R3-refund-over-ceiling" || step.Status != client.StepDenied || step.Error != ae || step.N != 1 {
		t.Errorf("denied step %+v with error %+v", step, ae)
	}

	_, err = rep.ProposeStep(ctx, "W2", "issue_refund", map[string]any{"order": "O-1002", "amount": 100, "approved_by": "lead-dee"})
	apiError(t, err, http.StatusUnprocessableEntity, "invalid_args")
	_, err = rep.ProposeStep(ctx, "W2", "wire_money", map[string]any{"order": "O-1002"})
	apiError(t, err, http.StatusNotFound, "unknown_tool")
	_, _, err = rep.CreateWorkflow(ctx, client.NewWorkflow{ID: "W2", Ticket: "T-other"})
	apiError(t, err, http.StatusConflict, "workflow_exists")
	_, err = as("lead-dee").ProposeStep(ctx, "W2", "lookup_order", map[string]any{"order": "O-1002"})
	if ae := apiError(t, err, http.StatusForbidden, "forbidden_role"); ae.Rule != "" {
		t.Errorf("a wrong role is not a policy decision: %+v", ae)
	}
	_, err = rep.Switches(ctx)
	apiError(t, err, http.StatusForbidden, "forbidden_role")

	stale, err := client.New(st.Endpoints.Sidecar, "not-a-jwt")
	if err != nil {
		t.Fatal(err)
	}
	_, err = stale.Tools(ctx)
	apiError(t, err, http.StatusUnauthorized, "token_malformed")
}

// An id is one path segment whatever it holds: it never reaches another
// endpoint.
func TestIDsStayOneSegment(t *testing.T) {
	_, as := start(t)
	ctx := context.Background()
	ops := as("ops-ida")
	for _, id := range []string{"../switches", "W1/resume", "a?b=c", "%2e%2e", "a b"} {
		// The 404 is the workflow's or the approval's own: the request
		// reached the endpoint it was meant for.
		_, err := ops.Workflow(ctx, id)
		if ae := apiError(t, err, http.StatusNotFound, "not_found"); !strings.HasPrefix(ae.Message, "workflow ") {
			t.Errorf("workflow %q reached another endpoint: %s", id, ae.Message)
		}
		_, err = ops.Approval(ctx, id)
		if ae := apiError(t, err, http.StatusNotFound, "not_found"); !strings.HasPrefix(ae.Message, "approval ") {
			t.Errorf("approval %q reached another endpoint: %s", id, ae.Message)
		}
	}
}

// The operator's calls: switches, modes, the credential epoch.
func TestOperatorCalls(t *testing.T) {
	_, as := start(t)
	ctx := context.Background()
	ops := as("ops-ida")
	sw, err := ops.Switches(ctx)
	if err != nil || !sw["issue_refund"] {
		t.Fatalf("switches %v, %v", sw, err)
	}
	if s, err := ops.SetSwitch(ctx, "issue_refund", false, "incident 7"); err != nil || s.Tool != "issue_refund" || s.Enabled {
		t.Fatalf("switch off: %+v, %v", s, err)
	}
	if sw, _ := ops.Switches(ctx); sw["issue_refund"] {
		t.Error("issue_refund still on")
	}
	modes, err := ops.Modes(ctx)
	if err != nil || len(modes) != 3 {
		t.Fatalf("modes %+v, %v", modes, err)
	}
	m, err := ops.SetMode(ctx, "issue_refund", "shadow", "new agent")
	if err != nil || m.Mode != "shadow" || m.SetBy != "ops-ida" || m.SetAt == nil {
		t.Fatalf("set mode: %+v, %v", m, err)
	}
	_, err = ops.SetMode(ctx, "issue_refund", "sometimes", "")
	var ae *client.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusUnprocessableEntity {
		t.Errorf("an unknown mode: %v", err)
	}
	before, err := ops.RaiseEpoch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after, err := ops.RaiseEpoch(ctx); err != nil || after != before+1 {
		t.Errorf("epoch %d then %d, %v", before, after, err)
	}
}

// Decoding: by default a field the client does not know is ignored, as
// the contract lets the server add fields; Strict refuses it, and a duplicate key.
// A body that is not the API's error shape is kept as the message.
func TestDecoding(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/tools":
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"tools": [{"name": "lookup_order", "description": "d", "input_schema": {}, "cost": 1}]}`))
		case "/v1/switches":
			w.Write([]byte(`{"switches": {"issue_refund": true, "issue_refund": false}}`))
		default:
			http.Error(w, "upstream timed out", http.StatusBadGateway)
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	lenient, _ := client.New(srv.URL, "t")
	strict, _ := client.New(srv.URL+"/", "t", client.Strict())

	if tools, err := lenient.Tools(ctx); err != nil || len(tools) != 1 || tools[0].Name != "lookup_order" {
		t.Errorf("lenient: %+v, %v", tools, err)
	}
	if _, err := strict.Tools(ctx); err == nil || !strings.Contains(err.Error(), "cost") {
		t.Errorf("strict took a field it does not know: %v", err)
	}
	if _, err := strict.Switches(ctx); err == nil {
		t.Error("strict took a duplicate key")
	}
	_, err := lenient.VerifyAudit(ctx)
	var ae *client.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusBadGateway || ae.Code != "" || ae.Message != "upstream timed out" {
		t.Errorf("a proxy's error page: %+v", err)
	}
}

// New refuses what is not a sidecar's base URL, and an empty token.
func TestNewRefuses(t *testing.T) {
	for _, c := range []struct{ url, token string }{
		{"", "t"},
		{"localhost:8080", "t"},
		{"ftp://host", "t"},
		{"http://", "t"},
		{"http://host/?x=1", "t"},
		{"http://host", ""},
		{"http://host\x7f", "t"},
	} {
		if _, err := client.New(c.url, c.token); err == nil {
			t.Errorf("New(%q, %q) accepted", c.url, c.token)
		}
	}
	if _, err := client.New("https://sidecar.example:8443/base/", "t"); err != nil {
		t.Errorf("a base with a path: %v", err)
	}
}

// Workflows pages through what the caller may read; WaitWorkflow sends no
// wait over MaxWait.
func TestWorkflowsAndWait(t *testing.T) {
	_, as := start(t)
	ctx := context.Background()
	rep := as("rep-ana")
	for _, id := range []string{"W1", "W2", "W3"} {
		if _, _, err := rep.CreateWorkflow(ctx, client.NewWorkflow{ID: id, Ticket: "T-" + id}); err != nil {
			t.Fatal(err)
		}
	}
	first, err := rep.Workflows(ctx, client.WorkflowQuery{Limit: 2})
	if err != nil || len(first.Workflows) != 2 || first.NextCursor == "" || first.Workflows[0].ID != "W1" {
		t.Fatalf("first page %+v, %v", first, err)
	}
	rest, err := rep.Workflows(ctx, client.WorkflowQuery{Limit: 2, Cursor: first.NextCursor})
	if err != nil || len(rest.Workflows) != 1 || rest.NextCursor != "" || rest.Workflows[0].ID != "W3" || rest.Workflows[0].StepCount != 0 {
		t.Fatalf("last page %+v, %v", rest, err)
	}
	if others, err := as("rep-ben").Workflows(ctx, client.WorkflowQuery{}); err != nil || len(others.Workflows) != 0 {
		t.Errorf("rep-ben lists %+v, %v; want none of rep-ana's", others, err)
	}
	_, err = rep.Workflows(ctx, client.WorkflowQuery{Status: "sleeping"})
	apiError(t, err, http.StatusBadRequest, "invalid_query")

	if _, _, err := rep.WaitWorkflow(ctx, "W1", "v", 2*time.Minute); err == nil {
		t.Error("a wait over MaxWait was sent")
	}
}

// WaitWorkflow answers at once for a version the caller has not seen (none
// yet, or one a change made before the call left behind), answers the
// same version when nothing changed, and waits for the next change
// otherwise. A call that waited when it should not would take MaxWait and
// answer the old version.
func TestWaitWorkflowByVersion(t *testing.T) {
	st, as := start(t)
	ctx := context.Background()
	rep := as("rep-ana")
	if _, _, err := rep.CreateWorkflow(ctx, client.NewWorkflow{ID: "W1", Ticket: "T-1"}); err != nil {
		t.Fatal(err)
	}
	w, v1, err := rep.WaitWorkflow(ctx, "W1", "", client.MaxWait)
	if err != nil || w.ID != "W1" || v1 == "" || st.Engine.Waiting() != 0 {
		t.Fatalf("the first read: %+v, version %q, %v", w, v1, err)
	}
	// A change between two waits is not missed.
	if _, err := rep.ProposeStep(ctx, "W1", "lookup_order", map[string]any{"order": "O-1001"}); err != nil {
		t.Fatal(err)
	}
	w, v2, err := rep.WaitWorkflow(ctx, "W1", v1, client.MaxWait)
	if err != nil || len(w.Steps) != 1 || v2 == v1 {
		t.Fatalf("a wait after a change it has not seen: %+v, version %q (was %q), %v", w, v2, v1, err)
	}
	if again, v, err := rep.WaitWorkflow(ctx, "W1", v2, 100*time.Millisecond); err != nil || v != v2 || len(again.Steps) != 1 {
		t.Errorf("a wait in which nothing changed: %+v, version %q (was %q), %v", again, v, v2, err)
	}

	type waited struct {
		w       client.Workflow
		version string
		err     error
	}
	changed := make(chan waited, 1)
	go func() {
		w, v, err := rep.WaitWorkflow(ctx, "W1", v2, client.MaxWait)
		changed <- waited{w, v, err}
	}()
	for st.Engine.Waiting() == 0 { // the wait has begun: what follows is a change to it
		time.Sleep(time.Millisecond)
	}
	if _, err := rep.ProposeStep(ctx, "W1", "lookup_order", map[string]any{"order": "O-1002"}); err != nil {
		t.Fatal(err)
	}
	if a := <-changed; a.err != nil || len(a.w.Steps) != 2 || a.version == v2 {
		t.Errorf("the wait answered %+v, version %q (was %q), %v; want the new step and a new version", a.w, a.version, v2, a.err)
	}
}

// OpenAndPropose opens a workflow with its first step in one request; the
// same call again is that step's duplicate, another ticket on the id a
// 409, and Propose carries the agent version and bounds that open one.
func TestOpenAndPropose(t *testing.T) {
	_, as := start(t)
	ctx := context.Background()
	rep := as("rep-ana")
	args := map[string]any{"order": "O-1001", "amount": 500}
	st, err := rep.OpenAndPropose(ctx, "W-op", "T-op", "issue_refund", args)
	if err != nil || st.Status != client.StepDone || st.N != 1 {
		t.Fatalf("open and propose: %+v, %v; want step 1 done", st, err)
	}
	if st, err = rep.OpenAndPropose(ctx, "W-op", "T-op", "issue_refund", args); err != nil || st.Status != client.StepSuppressed || st.DuplicateOf != 1 {
		t.Fatalf("again: %+v, %v; want a duplicate of step 1", st, err)
	}
	_, err = rep.OpenAndPropose(ctx, "W-op", "T-other", "issue_refund", args)
	apiError(t, err, http.StatusConflict, "workflow_exists")

	steps := 3
	if _, err := rep.Propose(ctx, "W-op2", client.NewStep{Tool: "lookup_order", Args: map[string]any{"order": "O-1001"},
		Ticket: "T-op2", AgentVersion: "v9", Bounds: &client.NewBounds{MaxSteps: &steps}}); err != nil {
		t.Fatal(err)
	}
	w, err := rep.Workflow(ctx, "W-op2")
	if err != nil || w.AgentVersion != "v9" || w.Bounds == nil || w.Bounds.MaxSteps != 3 || len(w.Steps) != 1 {
		t.Fatalf("W-op2: %+v, %v; want agent version v9, at most 3 steps, one step", w, err)
	}
}
