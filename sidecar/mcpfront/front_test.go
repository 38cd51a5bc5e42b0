package mcpfront_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/cmd/devstack"
	"github.com/countersign/countersign/sidecar/client"
	"github.com/countersign/countersign/sidecar/mcpfront"
)

// The demo's table 1 through MCP: six refund requests, each in its own
// session and workflow, each decided by its named rule; only the ALLOW
// pays, a waiting approval is not an error and a denial is.
func TestMCPSeedPolicyDecisions(t *testing.T) {
	st := start(t, devstack.Options{})
	cases := []struct {
		rep, order string
		cents      int64
		decision   string
		rule       string
		step       client.StepStatus
	}{
		{"rep-ana", "O-1001", 3000, "ALLOW", "default-allow-after-checks", client.StepDone},
		{"rep-ana", "O-1002", 12000, "REQUIRE_APPROVAL", "R7-refund-needs-approval", client.StepWaitingApproval},
		{"rep-ana", "O-1002", 60000, "DENY", "R3-refund-over-ceiling", client.StepDenied},
		{"rep-ana", "O-1003", 2000, "DENY", "R2-order-outside-region", client.StepDenied},
		{"rep-cy", "O-1003", 2000, "DENY", "R1-scope-not-delegated", client.StepDenied},
		{"rep-ana", "O-1001", 15000, "DENY", "R4-exceeds-amount-paid", client.StepDenied},
	}
	for i, c := range cases {
		wf := fmt.Sprintf("W-MCP-T1-%d", i+1)
		t.Run(fmt.Sprintf("%s_%s_%d_%s", c.rep, c.order, c.cents, c.decision), func(t *testing.T) {
			cs := connect(t, st, c.rep, workflowHeaders(wf, "T-"+wf))
			res := call(t, cs, "issue_refund", map[string]any{"order": c.order, "amount": c.cents})
			var s client.Step
			structured(t, res, &s)
			if s.Workflow != wf || s.N != 1 || s.Status != c.step || s.Decision != c.decision || s.Rule != c.rule {
				t.Errorf("step %s/%d %s/%s/%s, want %s/1 %s/%s/%s", s.Workflow, s.N, s.Status, s.Decision, s.Rule, wf, c.step, c.decision, c.rule)
			}
			if res.IsError != (c.step == client.StepDenied) {
				t.Errorf("IsError %v for a %s step: %s", res.IsError, s.Status, resultText(res))
			}
			switch c.step {
			case client.StepDenied:
				if s.Error == nil || s.Error.Code != "policy_denied" || s.Error.Rule != c.rule || !strings.Contains(resultText(res), c.rule) {
					t.Errorf("denied step's error %+v, text %q: want policy_denied naming %s", s.Error, resultText(res), c.rule)
				}
			case client.StepWaitingApproval:
				if s.Approval == nil || s.Approval.Status != client.ApprovalPending || s.Approval.Summary == "" || s.Approval.Expires.IsZero() {
					t.Fatalf("waiting step without its pending approval: %+v", s)
				}
				if txt := resultText(res); !strings.Contains(txt, s.Approval.ID) || !strings.Contains(txt, "countersign_wait") {
					t.Errorf("text %q: want the approval id and countersign_wait", txt)
				}
			case client.StepDone:
				if len(s.Result) == 0 {
					t.Errorf("done step without its result: %+v", s)
				}
			}
			// The API holds the same step: MCP showed it, not its own idea of it.
			w, err := apiClient(t, st, c.rep).Workflow(context.Background(), wf)
			if err != nil {
				t.Fatal(err)
			}
			if len(w.Steps) != 1 || w.Steps[0].Status != s.Status || w.Steps[0].Rule != s.Rule || w.Ticket != "T-"+wf || w.User != c.rep {
				t.Errorf("the API's workflow %+v, want one step as MCP answered it", w)
			}
		})
	}
	if got := ledgerEntries(t, st); len(got) != 1 || got[0].Order != "O-1001" || got[0].Amount != 3000 || got[0].By != "rep-ana" {
		t.Errorf("ledger %+v, want only the $30 refund on O-1001 by rep-ana", got)
	}
}

// A rep's countersign_wait blocks while the approval is pending, and an
// approval given through a lead's MCP session completes it: the workflow is
// resumed and the refund paid once.
func TestMCPApprovalCompletesWait(t *testing.T) {
	st := start(t, devstack.Options{})
	ctx := context.Background()
	agent := connect(t, st, "rep-ben", workflowHeaders("W-wait", "T-wait"))
	res := call(t, agent, "issue_refund", map[string]any{"order": "O-1004", "amount": 40000})
	var s client.Step
	structured(t, res, &s)
	if res.IsError || s.Status != client.StepWaitingApproval || s.Approval == nil {
		t.Fatalf("want waiting_approval, got %s", resultText(res))
	}

	// Before anyone answers, the wait ends still waiting, having run nothing.
	short := call(t, agent, "countersign_wait", map[string]any{"timeout_seconds": 1})
	var w client.Workflow
	structured(t, short, &w)
	if short.IsError || w.Status != client.WorkflowWaitingApproval || !strings.Contains(resultText(short), "still waiting") {
		t.Fatalf("a wait before the approval answered %s", resultText(short))
	}

	waited := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := agent.CallTool(ctx, &mcp.CallToolParams{Name: "countersign_wait"})
		if err != nil {
			t.Errorf("countersign_wait: %v", err)
		}
		waited <- res
	}()

	lead := connect(t, st, "lead-eli", nil)
	for st.Engine.Waiting() == 0 { // countersign_wait is waiting on the sidecar: the approval comes after
		time.Sleep(time.Millisecond)
	}
	list := call(t, lead, "approvals_pending", nil)
	var queue struct {
		Approvals []client.Approval `json:"approvals"`
	}
	structured(t, list, &queue)
	i := slices.IndexFunc(queue.Approvals, func(a client.Approval) bool { return a.ID == s.Approval.ID })
	if list.IsError || i < 0 {
		t.Fatalf("lead-eli's approvals_pending does not list %s: %s", s.Approval.ID, resultText(list))
	}
	// What a lead needs to decide, as the API's queue has it.
	if q := queue.Approvals[i]; q.Rule != "R7-refund-needs-approval" || q.Ticket != "T-wait" || q.Requester != "rep-ben" ||
		q.OrderPaid == 0 || q.OrderRefunded == nil || q.CanApprove == nil || !*q.CanApprove || q.Code != "" {
		t.Errorf("queue item %+v: want rule, ticket, requester, the order's amounts and can_approve", q)
	}
	if txt := resultText(list); !strings.Contains(txt, "R7-refund-needs-approval") || !strings.Contains(txt, "you may approve it") {
		t.Errorf("approvals_pending text %q: want the rule and that lead-eli may approve it", txt)
	}
	ok := call(t, lead, "approval_approve", map[string]any{"id": s.Approval.ID, "comment": "cracked on arrival"})
	var a client.Approval
	structured(t, ok, &a)
	if ok.IsError || a.Status != client.ApprovalApproved || a.Approver != "lead-eli" || a.Comment != "cracked on arrival" {
		t.Fatalf("approval_approve answered %s", resultText(ok))
	}

	res = <-waited
	if res == nil {
		t.FailNow()
	}
	structured(t, res, &w)
	if res.IsError || w.Status != client.WorkflowDone || len(w.Steps) != 1 || w.Steps[0].Status != client.StepDone ||
		w.Steps[0].Approval == nil || w.Steps[0].Approval.Status != client.ApprovalUsed {
		t.Fatalf("countersign_wait answered %s", resultText(res))
	}
	if got := ledgerEntries(t, st); len(got) != 1 || got[0].Amount != 40000 || got[0].Order != "O-1004" {
		t.Errorf("ledger %+v, want the one $400 refund", got)
	}
	// countersign_status shows the same workflow.
	var now client.Workflow
	structured(t, call(t, agent, "countersign_status", nil), &now)
	if now.ID != "W-wait" || now.Status != client.WorkflowDone {
		t.Errorf("countersign_status: %+v", now)
	}
}

// The demo's table 2 through the lead's tools: five wrong approvers of a
// $400 refund are each refused with their code, and nothing is paid. The
// leads use /mcp; the two reps get the approval tools as `countersign mcp
// --lead` gives them (the same server, here over in-memory transports and
// the typed client over HTTP), since /mcp gives a rep's token the catalog.
func TestMCPApproverRefusals(t *testing.T) {
	clock := newManualClock()
	st := start(t, devstack.Options{Clock: clock})
	agent := connect(t, st, "rep-ben", workflowHeaders("W1", "T-1"))
	var s client.Step
	structured(t, call(t, agent, "issue_refund", map[string]any{"order": "O-1004", "amount": 40000}), &s)
	if s.Approval == nil {
		t.Fatalf("no approval on %+v", s)
	}

	// lead-fay's queue leaves out what she may not approve; the whole
	// queue shows it with the reason.
	fay := connect(t, st, "lead-fay", nil)
	var mine, all struct {
		Approvals []client.Approval `json:"approvals"`
	}
	structured(t, call(t, fay, "approvals_pending", nil), &mine)
	whole := call(t, fay, "approvals_pending", map[string]any{"all": true})
	structured(t, whole, &all)
	if slices.ContainsFunc(mine.Approvals, func(a client.Approval) bool { return a.ID == s.Approval.ID }) {
		t.Errorf("lead-fay's own queue lists %s, above her limit", s.Approval.ID)
	}
	i := slices.IndexFunc(all.Approvals, func(a client.Approval) bool { return a.ID == s.Approval.ID })
	if i < 0 || all.Approvals[i].CanApprove == nil || *all.Approvals[i].CanApprove || all.Approvals[i].Code != "above_approver_limit" ||
		!strings.Contains(resultText(whole), "you may not approve it: above_approver_limit") {
		t.Errorf("lead-fay's whole queue: %s", resultText(whole))
	}

	for _, c := range []struct {
		approver string
		advance  time.Duration
		code     string
	}{
		{"rep-ben", 0, "requester_cannot_approve"},
		{"rep-cy", 0, "forbidden_role"},
		{"lead-fay", 0, "above_approver_limit"},
		{"lead-dee", 0, "approver_outside_region"},
		{"lead-eli", 1000 * time.Second, "approval_expired"},
	} {
		t.Run(c.approver, func(t *testing.T) {
			clock.Advance(c.advance)
			var lead *mcp.ClientSession
			if strings.HasPrefix(c.approver, "lead-") {
				lead = connect(t, st, c.approver, nil)
			} else {
				lead = inMemoryLead(t, st, c.approver)
			}
			res := call(t, lead, "approval_approve", map[string]any{"id": s.Approval.ID, "comment": "ok"})
			if e := apiErrorOf(t, res); e.Status != http.StatusForbidden || e.Code != c.code || !strings.Contains(resultText(res), c.code) {
				t.Errorf("approval_approve as %s: %d %s (%s), want 403 %s", c.approver, e.Status, e.Code, resultText(res), c.code)
			}
		})
	}
	lead := connect(t, st, "lead-eli", nil)
	var a client.Approval
	structured(t, call(t, lead, "approval_get", map[string]any{"id": s.Approval.ID}), &a)
	if a.Status != client.ApprovalExpired || a.Approver != "" {
		t.Errorf("approval %+v after the refusals, want expired with no approver", a)
	}
	if e := apiErrorOf(t, call(t, lead, "approval_reject", map[string]any{"id": s.Approval.ID})); e.Code != "not_pending" {
		t.Errorf("rejecting an expired approval: %s, want not_pending", e.Code)
	}
	if got := ledgerEntries(t, st); len(got) != 0 {
		t.Errorf("ledger %+v, want nothing paid", got)
	}
}

// inMemoryLead is the lead tool set as `countersign mcp --lead` serves it,
// as who, over in-memory transports.
func inMemoryLead(t *testing.T, st *devstack.Stack, who string) *mcp.ClientSession {
	t.Helper()
	c := apiClient(t, st, who)
	srv := mcpfront.NewServer(mcpfront.Config{Lead: true, Client: func(*mcp.CallToolRequest) (*client.Client, error) { return c, nil }})
	ct, stt := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := srv.Connect(ctx, stt, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(); ss.Wait() })
	return cs
}

// Bad input gets the API's answer: the same code and message as the same
// call on /v1, and nothing runs.
func TestMCPBadInputGetsTheAPIsAnswer(t *testing.T) {
	st := start(t, devstack.Options{})
	ctx := context.Background()
	agent := connect(t, st, "rep-ana", workflowHeaders("W-bad", "T-bad"))
	api := apiClient(t, st, "rep-ana")
	if _, _, err := api.CreateWorkflow(ctx, client.NewWorkflow{ID: "W-bad-v1", Ticket: "T-bad"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		tool string
		args any
		code string
	}{
		{"an unknown field", "issue_refund", map[string]any{"order": "O-1002", "amount": 100, "approved_by": "lead-dee"}, "invalid_args"},
		{"an amount of the wrong type", "issue_refund", map[string]any{"order": "O-1002", "amount": "100"}, "invalid_args"},
		{"a fractional amount", "issue_refund", map[string]any{"order": "O-1002", "amount": 1.5}, "invalid_args"},
		{"a bad order id", "lookup_order", map[string]any{"order": "1001"}, "invalid_args"},
		{"a key twice", "lookup_order", jsonRaw(`{"order":"O-1001","order":"O-1002"}`), "malformed_json"},
		{"no arguments", "reship_order", map[string]any{}, "invalid_args"},
	} {
		t.Run(c.name, func(t *testing.T) {
			want, err := api.ProposeStep(ctx, "W-bad-v1", c.tool, c.args)
			var ae *client.Error
			if !errors.As(err, &ae) || ae.Code != c.code {
				t.Fatalf("/v1 answered %+v, %v; want %s", want, err, c.code)
			}
			got := apiErrorOf(t, call(t, agent, c.tool, c.args))
			if got.Status != ae.Status || got.Code != ae.Code || got.Message != ae.Message || got.Rule != ae.Rule {
				t.Errorf("MCP answered %d %s %q, /v1 %d %s %q", got.Status, got.Code, got.Message, ae.Status, ae.Code, ae.Message)
			}
		})
	}
	t.Run("an unknown tool", func(t *testing.T) {
		_, err := api.ProposeStep(ctx, "W-bad-v1", "delete_order", map[string]any{"order": "O-1001"})
		var ae *client.Error
		if !errors.As(err, &ae) || ae.Code != "unknown_tool" {
			t.Fatalf("/v1 answered %v", err)
		}
		for _, cs := range []*mcp.ClientSession{agent, connect(t, st, "lead-dee", nil)} {
			if got := apiErrorOf(t, call(t, cs, "delete_order", map[string]any{"order": "O-1001"})); got.Status != ae.Status || got.Code != ae.Code {
				t.Errorf("MCP answered %d %s, /v1 %d %s", got.Status, got.Code, ae.Status, ae.Code)
			}
		}
	})
	t.Run("an approver named in the arguments", func(t *testing.T) {
		want := v1Error(t, st, "lead-dee", http.MethodPost, "/v1/approvals/A-1/approve", `{"comment":"ok","approver":"lead-eli"}`)
		lead := connect(t, st, "lead-dee", nil)
		got := apiErrorOf(t, call(t, lead, "approval_approve", map[string]any{"id": "A-1", "comment": "ok", "approver": "lead-eli"}))
		if got.Status != want.Status || got.Code != want.Code || got.Message != want.Message {
			t.Errorf("MCP answered %d %s %q, /v1 %d %s %q", got.Status, got.Code, got.Message, want.Status, want.Code, want.Message)
		}
		want = v1Error(t, st, "lead-dee", http.MethodGet, "/v1/approvals/no-such-approval", "")
		got = apiErrorOf(t, call(t, lead, "approval_get", map[string]any{"id": "no-such-approval"}))
		if got.Status != want.Status || got.Code != want.Code || got.Message != want.Message {
			t.Errorf("an unknown approval: MCP answered %d %s %q, /v1 %d %s %q", got.Status, got.Code, got.Message, want.Status, want.Code, want.Message)
		}
	})
	// Nothing ran: the session's workflow, which its first accepted call
	// would have opened, is not there, the one opened on /v1 has no step,
	// and the ledger has no entry.
	var ae *client.Error
	if w, err := api.Workflow(ctx, "W-bad"); !errors.As(err, &ae) || ae.Code != "not_found" {
		t.Errorf("workflow W-bad: %+v, %v; want not_found: a refused call opens nothing", w, err)
	}
	if w, err := api.Workflow(ctx, "W-bad-v1"); err != nil || len(w.Steps) != 0 {
		t.Errorf("workflow W-bad-v1: %+v, %v; want no steps", w, err)
	}
	if got := ledgerEntries(t, st); len(got) != 0 {
		t.Errorf("ledger %+v, want nothing", got)
	}
}

// The token decides who speaks and with which tools: no bearer or a bad
// one is the API's 401 with a Bearer challenge; a rep's session never sees
// the approval tools and a lead's never the catalog; a session stays with
// the subject that opened it.
func TestMCPAuthentication(t *testing.T) {
	st := start(t, devstack.Options{})
	for _, c := range []struct{ name, auth string }{
		{"no bearer", ""},
		{"not a token", "Bearer not-a-jwt"},
		{"another scheme", "Basic cmVwLWFuYTp4"},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, st.Endpoints.Sidecar+"/mcp",
				strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if c.auth != "" {
				req.Header.Set("Authorization", c.auth)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			var body struct {
				Error *client.Error `json:"error"`
			}
			jsonDecode(t, res, &body)
			if res.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(res.Header.Get("WWW-Authenticate"), "Bearer") ||
				body.Error == nil || body.Error.Code == "" {
				t.Errorf("status %d, WWW-Authenticate %q, body %+v; want the API's 401 with a Bearer challenge",
					res.StatusCode, res.Header.Get("WWW-Authenticate"), body.Error)
			}
		})
	}

	catalog := []string{"countersign_status", "countersign_wait", "issue_refund", "lookup_order", "reship_order"}
	approvals := []string{"approval_approve", "approval_get", "approval_reject", "approvals_pending"}
	for who, want := range map[string][]string{"rep-ana": catalog, "lead-dee": approvals, "ops-ida": approvals} {
		got := toolNames(t, connect(t, st, who, nil))
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s's session lists %v, want %v", who, got, want)
		}
	}

	// The catalog's schemas and descriptions are the API's, as given, but
	// for the workflow and ticket arguments the front adds.
	api, err := apiClient(t, st, "rep-ana").Tools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	listed, err := connect(t, st, "rep-ana", nil).ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range api {
		i := slices.IndexFunc(listed.Tools, func(tl *mcp.Tool) bool { return tl.Name == want.Name })
		if i < 0 {
			t.Fatalf("%s not listed", want.Name)
		}
		got := listed.Tools[i]
		schema, _ := got.InputSchema.(map[string]any)
		props, _ := schema["properties"].(map[string]any)
		if props["workflow"] == nil || props["ticket"] == nil || props["reason"] == nil {
			t.Errorf("%s: schema %v without the workflow, ticket and reason arguments", want.Name, got.InputSchema)
		}
		delete(props, "workflow")
		delete(props, "ticket")
		delete(props, "reason")
		if got.Description != want.Description || !sameJSON(t, schema, want.InputSchema) {
			t.Errorf("%s: description %q schema %v, want the API's %q %s", want.Name, got.Description, schema, want.Description, want.InputSchema)
		}
	}

	// Another subject cannot use a session: the SDK refuses it 403.
	var sessionID string
	mine := &http.Client{Transport: sessionSpy{headers{http.Header{"Authorization": {"Bearer " + st.Tokens["rep-ana"]}}, http.DefaultTransport}, &sessionID}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "0"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: st.Endpoints.Sidecar + "/mcp", HTTPClient: mine, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if sessionID == "" {
		t.Fatal("no Mcp-Session-Id in the initialize answer")
	}
	req, _ := http.NewRequest(http.MethodPost, st.Endpoints.Sidecar+"/mcp",
		strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"issue_refund","arguments":{"order":"O-1001","amount":100}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sessionID)
	req.Header.Set("Authorization", "Bearer "+st.Tokens["rep-ben"])
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Errorf("rep-ben on rep-ana's session: status %d, want 403", res.StatusCode)
	}
	if got := ledgerEntries(t, st); len(got) != 0 {
		t.Errorf("ledger %+v, want nothing", got)
	}
}

// A workflow named by its headers is opened once and reopened by a later
// session with the same id and ticket; without headers each session gets
// its own workflow, ticket mcp-<session id>.
func TestMCPSessionWorkflow(t *testing.T) {
	st := start(t, devstack.Options{})
	var first client.Step
	structured(t, call(t, connect(t, st, "rep-ana", workflowHeaders("W-named", "T-named")), "lookup_order", map[string]any{"order": "O-1001"}), &first)
	var again client.Step
	structured(t, call(t, connect(t, st, "rep-ana", workflowHeaders("W-named", "T-named")), "lookup_order", map[string]any{"order": "O-1002"}), &again)
	if first.Workflow != "W-named" || again.Workflow != "W-named" || again.N != 2 {
		t.Errorf("steps %s/%d and %s/%d, want W-named/1 and W-named/2", first.Workflow, first.N, again.Workflow, again.N)
	}

	// The same id with another ticket is the API's conflict.
	clash := call(t, connect(t, st, "rep-ana", workflowHeaders("W-named", "T-other")), "lookup_order", map[string]any{"order": "O-1001"})
	if e := apiErrorOf(t, clash); e.Status != http.StatusConflict || e.Code != "workflow_exists" {
		t.Errorf("another ticket on W-named: %d %s, want 409 workflow_exists", e.Status, e.Code)
	}

	// Without headers, a session's first call opens its own workflow,
	// which its later calls and countersign_status find again.
	cs := connect(t, st, "rep-ana", nil)
	var a, b client.Step
	structured(t, call(t, cs, "lookup_order", map[string]any{"order": "O-1001"}), &a)
	structured(t, call(t, cs, "lookup_order", map[string]any{"order": "O-1002"}), &b)
	var w client.Workflow
	structured(t, call(t, cs, "countersign_status", nil), &w)
	other := connect(t, st, "rep-ana", nil)
	var c client.Step
	structured(t, call(t, other, "lookup_order", map[string]any{"order": "O-1001"}), &c)
	if a.Workflow == "" || b.Workflow != a.Workflow || b.N != 2 || w.ID != a.Workflow || w.Ticket != "mcp-"+cs.ID() || c.Workflow == a.Workflow {
		t.Errorf("sessions' workflows %s, %s/%d, status %s (%s), %s: want one per session, ticket mcp-%s",
			a.Workflow, b.Workflow, b.N, w.ID, w.Ticket, c.Workflow, cs.ID())
	}
}

// The sidecar shuts down cleanly while MCP sessions hold their streams
// open: it closes them instead of waiting out its grace period.
func TestMCPSessionsEndAtShutdown(t *testing.T) {
	o := devstack.Options{DataDir: t.TempDir()}
	st, err := devstack.Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "0"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: st.Endpoints.Sidecar + "/mcp", HTTPClient: bearerClient(t, st, "rep-ana", nil), MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Errorf("closing the stack with an MCP session open: %v", err)
	}
}

// held and suppressed are not errors and say what they mean; a held step
// runs at countersign_wait once the operator switches the tool back on,
// and the same call again runs nothing.
func TestMCPHeldAndSuppressed(t *testing.T) {
	st := start(t, devstack.Options{})
	ctx := context.Background()
	ops := apiClient(t, st, "ops-ida")
	if _, err := ops.SetSwitch(ctx, "issue_refund", false, "incident drill"); err != nil {
		t.Fatal(err)
	}
	agent := connect(t, st, "rep-ana", workflowHeaders("W-held", "T-held"))
	refund := map[string]any{"order": "O-1001", "amount": 3000}
	res := call(t, agent, "issue_refund", refund)
	var s client.Step
	structured(t, res, &s)
	if res.IsError || s.Status != client.StepHeld || !strings.HasPrefix(resultText(res), "held:") {
		t.Fatalf("a refund with the switch off: %s", resultText(res))
	}
	if got := ledgerEntries(t, st); len(got) != 0 {
		t.Fatalf("a held refund paid: %+v", got)
	}
	if _, err := ops.SetSwitch(ctx, "issue_refund", true, "drill over"); err != nil {
		t.Fatal(err)
	}
	var w client.Workflow
	res = call(t, agent, "countersign_wait", nil)
	structured(t, res, &w)
	if res.IsError || w.Status != client.WorkflowDone || w.Steps[0].Status != client.StepDone {
		t.Fatalf("countersign_wait after the switch came back: %s", resultText(res))
	}
	res = call(t, agent, "issue_refund", refund)
	structured(t, res, &s)
	if res.IsError || s.Status != client.StepSuppressed || s.DuplicateOf != 1 || !strings.HasPrefix(resultText(res), "suppressed:") {
		t.Errorf("the same refund again: %s", resultText(res))
	}
	if got := ledgerEntries(t, st); len(got) != 1 {
		t.Errorf("ledger %+v, want the one refund", got)
	}
}
