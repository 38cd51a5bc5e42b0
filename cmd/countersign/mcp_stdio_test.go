package main_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/cmd/devstack"
	"github.com/countersign/countersign/sidecar/client"
)

// The built binary as an agent launches it: `countersign mcp` on stdio,
// forwarding to a sidecar. A rep's session lists the catalog and makes
// governed calls in the named workflow; a lead's (--lead) approves the one
// that waits, and the rep's countersign_wait then runs it.
func TestMCPStdio(t *testing.T) {
	bin := buildServeBinary(t)
	st, err := devstack.Start(context.Background(), devstack.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })

	agent := stdioSession(t, bin, st, "rep-ana", "--workflow", "W-stdio", "--ticket", "T-stdio")
	tools, err := agent.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	if want := []string{"countersign_status", "countersign_wait", "issue_refund", "lookup_order", "reship_order"}; !slices.Equal(names, want) {
		t.Errorf("tools %v, want %v", names, want)
	}

	done := stdioStep(t, stdioCall(t, agent, "issue_refund", map[string]any{"order": "O-1001", "amount": 3000}))
	if done.Workflow != "W-stdio" || done.Status != client.StepDone {
		t.Errorf("first refund: %+v", done)
	}
	denied := stdioCall(t, agent, "issue_refund", map[string]any{"order": "O-1002", "amount": 60000})
	if s := stdioStep(t, denied); !denied.IsError || s.Status != client.StepDenied || s.Rule != "R3-refund-over-ceiling" {
		t.Errorf("a refund over the ceiling: error %v, step %+v", denied.IsError, s)
	}
	waiting := stdioStep(t, stdioCall(t, agent, "issue_refund", map[string]any{"order": "O-1002", "amount": 12000}))
	if waiting.Status != client.StepWaitingApproval || waiting.Approval == nil {
		t.Fatalf("a refund above the auto limit: %+v", waiting)
	}

	lead := stdioSession(t, bin, st, "lead-dee", "--lead")
	if ok := stdioCall(t, lead, "approval_approve", map[string]any{"id": waiting.Approval.ID}); ok.IsError {
		t.Fatalf("approval_approve: %+v", ok.Content)
	}
	res := stdioCall(t, agent, "countersign_wait", nil)
	var w client.Workflow
	stdioDecode(t, res, &w)
	if res.IsError || w.ID != "W-stdio" || len(w.Steps) != 3 || w.Steps[2].Status != client.StepDone {
		t.Errorf("countersign_wait: %+v", w)
	}
}

// stdioSession launches `countersign mcp` as who, as an agent would, and
// connects the SDK's client to it.
func stdioSession(t *testing.T, bin string, st *devstack.Stack, who string, args ...string) *mcp.ClientSession {
	t.Helper()
	tokenFile := filepath.Join(t.TempDir(), who+".jwt")
	if err := os.WriteFile(tokenFile, []byte(st.Tokens[who]+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append([]string{"mcp", "--sidecar", st.Endpoints.Sidecar, "--token-file", tokenFile}, args...)...)
	cmd.Stderr = os.Stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil).Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("countersign mcp as %s: %v", who, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func stdioCall(t *testing.T, cs *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("tools/call %s: %v", name, err)
	}
	return res
}

func stdioStep(t *testing.T, res *mcp.CallToolResult) client.Step {
	t.Helper()
	var s client.Step
	stdioDecode(t, res, &s)
	return s
}

func stdioDecode(t *testing.T, res *mcp.CallToolResult, v any) {
	t.Helper()
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
}
