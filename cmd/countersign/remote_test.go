package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/countersign/countersign/cmd/devstack"
)

// runCmd runs the root command with args and returns what it printed.
func runCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

// tokenFile writes person who's dev token to a file of its own.
func tokenFile(t *testing.T, st *devstack.Stack, who string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), who+".jwt")
	if err := os.WriteFile(path, []byte(st.Tokens[who]+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// The exports read a running sidecar over HTTP, where --data would find
// the store locked: the audit whole and filtered, the decision log by
// rule; the lines are the records the API's pages show.
func TestExportsReadARunningSidecar(t *testing.T) {
	dir := t.TempDir()
	st, err := devstack.Start(context.Background(), devstack.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	seedDecisions(t, st)
	ops := tokenFile(t, st, "ops-ida")
	remote := []string{"--sidecar", st.Endpoints.Sidecar, "--token-file", ops}

	file := filepath.Join(t.TempDir(), "audit.ndjson")
	out, err := runCmd(t, append([]string{"audit", "export", "-o", file}, remote...)...)
	if err != nil {
		t.Fatalf("audit export: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	records := ndjson(t, string(raw))
	_, body := apiCall(t, st, "GET", "/v1/audit?limit=1000", "ops-ida", nil)
	var page struct {
		Records []map[string]any `json:"records"`
	}
	if err := json.Unmarshal(body, &page); err != nil {
		t.Fatal(err)
	}
	if len(records) != len(page.Records) || len(records) < 6 || !strings.Contains(out, "wrote ") {
		t.Fatalf("exported %d records (%q), the API holds %d", len(records), out, len(page.Records))
	}
	for i := range records {
		if records[i]["hash"] != page.Records[i]["hash"] {
			t.Fatalf("record %d: %v, the API's %v", i, records[i], page.Records[i])
		}
	}

	out, err = runCmd(t, append([]string{"audit", "export", "--workflow", "W2", "--from", "1"}, remote...)...)
	if err != nil {
		t.Fatalf("audit export --workflow W2: %v\n%s", err, out)
	}
	for _, r := range ndjson(t, out) {
		if r["workflow"] != "W2" {
			t.Errorf("--workflow W2 exported %v", r)
		}
	}

	out, err = runCmd(t, append([]string{"decisions", "export", "--rule", "R7-refund-needs-approval"}, remote...)...)
	if err != nil {
		t.Fatalf("decisions export --rule: %v\n%s", err, out)
	}
	decisions := ndjson(t, out)
	if len(decisions) != 3 {
		t.Errorf("%d decisions of R7, want the three that waited for an approval:\n%s", len(decisions), out)
	}
	for _, d := range decisions {
		if d["rule"] != "R7-refund-needs-approval" || d["decision_id"] == "" {
			t.Errorf("--rule exported %v", d)
		}
	}

	// A rep may not export the audit: the sidecar's answer is the error.
	rep := tokenFile(t, st, "rep-ana")
	if _, err := runCmd(t, "audit", "export", "--sidecar", st.Endpoints.Sidecar, "--token-file", rep, "-o", file); err == nil || !strings.Contains(err.Error(), "forbidden_role") {
		t.Errorf("a rep's export: %v, want forbidden_role", err)
	}
	if _, err := os.Stat(file); err == nil {
		t.Errorf("a refused export left %s behind", file)
	}
}

// The flags say which source, and filters go with a running sidecar.
func TestExportFlagsSayWhatToDo(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"audit", "export"}, "say where the log is"},
		{[]string{"audit", "export", "--data", "/nonexistent", "--sidecar", "http://127.0.0.1:1", "--token-file", "f"}, "choose one"},
		{[]string{"audit", "export", "--data", "/nonexistent", "--rep", "rep-ana"}, "select from a running sidecar"},
		{[]string{"audit", "export", "--sidecar", "http://127.0.0.1:1"}, "go together"},
		{[]string{"decisions", "export", "--data", "/nonexistent", "--rule", "R1"}, "select from a running sidecar"},
		{[]string{"decisions", "export"}, "say where the log is"},
	} {
		if _, err := runCmd(t, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
}

// audit explain answers every question for a refund a lead approved and
// for one the policy denied, over the sidecar's socket, in words and as
// JSON; a call the token may not see is not found (exit 2).
func TestAuditExplain(t *testing.T) {
	st, err := devstack.Start(context.Background(), devstack.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	seedDecisions(t, st) // W1/2: $60.00 on O-1002 waits for a lead; W2/2: $150.00 on O-1001 denied
	_, body := apiCall(t, st, "GET", "/v1/workflows/W1", "rep-ana", nil)
	var w struct {
		Steps []struct {
			Approval *struct {
				ID string `json:"id"`
			} `json:"approval"`
		} `json:"steps"`
	}
	if err := json.Unmarshal(body, &w); err != nil || len(w.Steps) < 2 || w.Steps[1].Approval == nil {
		t.Fatalf("W1: %v %s", err, body)
	}
	if status, b := apiCall(t, st, "POST", "/v1/approvals/"+w.Steps[1].Approval.ID+"/approve", "lead-dee", map[string]string{"comment": "loyal customer"}); status != 200 {
		t.Fatalf("approve: %d %s", status, b)
	}
	if status, b := apiCall(t, st, "POST", "/v1/workflows/W1/resume", "rep-ana", nil); status != 200 {
		t.Fatalf("resume: %d %s", status, b)
	}
	remote := []string{"--sidecar", st.Endpoints.Sidecar, "--token-file", tokenFile(t, st, "rep-ana")}

	out, err := runCmd(t, append([]string{"audit", "explain", "W1/2"}, remote...)...)
	if err != nil {
		t.Fatalf("explain W1/2: %v\n%s", err, out)
	}
	for _, want := range []string{
		"issue_refund O-1002 $60.00", "done", "rep-ana, ticket T-W1", "REQUIRE_APPROVAL by rule R7-refund-needs-approval",
		"revision p1, digest ", "by lead-dee", `"loyal customer"`, "(the call's own)", "entry ", "$60.00",
		"position ", "decision by rep-ana", "approval by lead-dee", "dispatch by engine", "result by engine", "PROVEN: the chain verifies from its first record through position",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("explain W1/2 does not say %q:\n%s", want, out)
		}
	}

	out, err = runCmd(t, append([]string{"audit", "explain", "W2/2", "--json"}, remote...)...)
	if err != nil {
		t.Fatalf("explain W2/2: %v\n%s", err, out)
	}
	var ev struct {
		Policy struct {
			Decision, Rule, Digest string
			Input                  map[string]any
		}
		Approval     *struct{}
		Effect       *struct{}
		Records      []struct{ Kind string }
		Verification struct{ OK bool }
	}
	if err := json.Unmarshal([]byte(out), &ev); err != nil {
		t.Fatalf("--json: %v\n%s", err, out)
	}
	if ev.Policy.Decision != "DENY" || ev.Policy.Rule == "" || ev.Policy.Digest == "" || ev.Policy.Input == nil ||
		ev.Approval != nil || ev.Effect != nil || len(ev.Records) == 0 || ev.Records[0].Kind != "decision" || !ev.Verification.OK {
		t.Errorf("explain W2/2 --json: %+v", ev)
	}

	ben := []string{"--sidecar", st.Endpoints.Sidecar, "--token-file", tokenFile(t, st, "rep-ben")}
	if _, err := runCmd(t, append([]string{"audit", "explain", "W1/2"}, ben...)...); exitCode(err) != 2 || !strings.Contains(err.Error(), "not_found") {
		t.Errorf("another rep's explain: exit %d, %v; want 2 and not_found", exitCode(err), err)
	}
	if _, err := runCmd(t, append([]string{"audit", "explain", "W1"}, remote...)...); exitCode(err) != 2 || !strings.Contains(err.Error(), "WORKFLOW/STEP") {
		t.Errorf("explain W1: %v, want the form WORKFLOW/STEP", err)
	}
}
