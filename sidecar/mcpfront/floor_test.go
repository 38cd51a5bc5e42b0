package mcpfront_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/bundles"
	"github.com/countersign/countersign/cmd/devstack"
	"github.com/countersign/countersign/executor/fixture"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/sidecar/client"
)

// activateApprovers makes p1 the active bundle with approver rules that
// allow anyone ids names, whatever their role, region or limit (issue
// 20's second hole), proposed and approved by two operators.
func activateApprovers(t *testing.T, st *devstack.Stack, ids ...string) {
	t.Helper()
	fsys, err := bundles.Variant("p1", "p1-approvers", func(s string) string { return s }, nil)
	if err != nil {
		t.Fatal(err)
	}
	const first = `refused("requester_cannot_approve") if {`
	f := fsys["approver/approver.rego"]
	if !bytes.Contains(f.Data, []byte("verdict := "+first)) {
		t.Fatalf("p1's approver rules no longer start with verdict := %s", first)
	}
	quoted, _ := json.Marshal(ids)
	f.Data = bytes.Replace(f.Data, []byte("verdict := "+first), fmt.Appendf(nil,
		"verdict := {\"allowed\": true} if {\n\tinput.approver.id in %s\n} else := %s", quoted, first), 1)
	b, err := policy.LoadFS(fsys)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Releases.ActivateBundle(context.Background(), b, policy.Activation{By: "ops-jon", Proposer: "ops-ida"}); err != nil {
		t.Fatalf("activate %s: %v", b.Revision(), err)
	}
}

// The lead's tools keep the approval floor: under a bundle whose approver
// rules accept rep-ana and ops-ida, rep-ana's /mcp session has no
// approval tools, and given them (countersign mcp --lead) she is refused;
// ops-ida on /mcp is refused; a lead token for Rep-Ana cannot approve
// rep-ana's own call. Nothing is paid.
func TestMCPLeadToolsKeepTheApprovalFloor(t *testing.T) {
	st := start(t, devstack.Options{})
	activateApprovers(t, st, "rep-ana", "ops-ida")
	request := func(who, wf, order string, cents int64) (*mcp.ClientSession, string) {
		agent := connect(t, st, who, workflowHeaders(wf, "T-"+wf))
		var s client.Step
		structured(t, call(t, agent, "issue_refund", map[string]any{"order": order, "amount": cents}), &s)
		if s.Approval == nil {
			t.Fatalf("%s's refund of %d on %s does not wait for an approval: %+v", who, cents, order, s)
		}
		return agent, s.Approval.ID
	}
	_, ben := request("rep-ben", "W-ben", "O-1004", 30000)
	ana, own := request("rep-ana", "W-ana", "O-1002", 12000)

	if names := toolNames(t, ana); slices.Contains(names, "approval_approve") {
		t.Errorf("rep-ana's /mcp session has the approval tools: %v", names)
	}
	if res, err := ana.CallTool(context.Background(), &mcp.CallToolParams{Name: "approval_approve", Arguments: map[string]any{"id": ben}}); err == nil && !res.IsError {
		t.Errorf("rep-ana's /mcp session approved: %s", resultText(res))
	}

	dee, _ := fixture.PersonByID("lead-dee")
	dee.ID = "Rep-Ana"
	tok, err := st.IdP.Sign(dee, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		session func() *mcp.ClientSession
		tool    string
		id      string
		code    string
	}{
		{"rep-ana with the lead's tools approves", func() *mcp.ClientSession { return inMemoryLead(t, st, "rep-ana") }, "approval_approve", ben, "forbidden_role"},
		{"ops-ida on /mcp approves", func() *mcp.ClientSession { return connect(t, st, "ops-ida", nil) }, "approval_approve", ben, "forbidden_role"},
		{"ops-ida on /mcp rejects", func() *mcp.ClientSession { return connect(t, st, "ops-ida", nil) }, "approval_reject", ben, "forbidden_role"},
		{"Rep-Ana, a lead, approves rep-ana's call", func() *mcp.ClientSession {
			return connect(t, st, "", http.Header{"Authorization": {"Bearer " + tok}})
		}, "approval_approve", own, "requester_cannot_approve"},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := call(t, c.session(), c.tool, map[string]any{"id": c.id, "comment": "looks fine"})
			if e := apiErrorOf(t, res); e.Status != http.StatusForbidden || e.Code != c.code || !strings.Contains(resultText(res), c.code) {
				t.Errorf("%s: %d %s (%s), want 403 %s", c.tool, e.Status, e.Code, resultText(res), c.code)
			}
		})
	}

	for wf, who := range map[string]string{"W-ben": "rep-ben", "W-ana": "rep-ana"} {
		w, err := apiClient(t, st, who).Resume(context.Background(), wf)
		if err != nil || w.Steps[0].Status != client.StepWaitingApproval {
			t.Errorf("resume %s: %+v %v, want its step still waiting for an approval", wf, w, err)
		}
	}
	if got := ledgerEntries(t, st); len(got) != 0 {
		t.Errorf("ledger %+v, want nothing paid", got)
	}
}
