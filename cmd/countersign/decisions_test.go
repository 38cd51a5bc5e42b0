package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/plugins/logs"

	"github.com/countersign/countersign/cmd/devstack"
)

// apiCall sends one request to the stack's sidecar as person who and
// returns the status and the body.
func apiCall(t *testing.T, st *devstack.Stack, method, path, who string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, st.Endpoints.Sidecar+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+st.Tokens[who])
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, b
}

// seedDecisions has rep-ana's agent propose six calls over HTTP, in two
// workflows, under p1: three refunds between $50 and $75 that wait for an
// approval, two calls allowed and one refund above what was paid, denied.
func seedDecisions(t *testing.T, st *devstack.Stack) {
	t.Helper()
	for _, wf := range []string{"W1", "W2"} {
		if status, body := apiCall(t, st, http.MethodPost, "/v1/workflows", "rep-ana", map[string]string{"id": wf, "ticket": "T-" + wf}); status != http.StatusCreated {
			t.Fatalf("open %s: %d %s", wf, status, body)
		}
	}
	for _, c := range []struct {
		wf, tool string
		args     map[string]any
		status   int
	}{
		{"W1", "issue_refund", map[string]any{"order": "O-1001", "amount": 3000}, http.StatusOK},
		{"W1", "issue_refund", map[string]any{"order": "O-1002", "amount": 6000}, http.StatusAccepted},
		{"W1", "lookup_order", map[string]any{"order": "O-1001"}, http.StatusOK},
		{"W2", "issue_refund", map[string]any{"order": "O-1002", "amount": 7000}, http.StatusAccepted},
		{"W2", "issue_refund", map[string]any{"order": "O-1001", "amount": 15000}, http.StatusForbidden},
		{"W2", "issue_refund", map[string]any{"order": "O-1005", "amount": 5500}, http.StatusAccepted},
	} {
		status, body := apiCall(t, st, http.MethodPost, "/v1/workflows/"+c.wf+"/steps", "rep-ana", map[string]any{"tool": c.tool, "args": c.args})
		if status != c.status {
			t.Fatalf("%s %s %v: %d, want %d: %s", c.wf, c.tool, c.args, status, c.status, body)
		}
	}
}

func runDecisions(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append([]string{"decisions"}, args...))
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

// ndjson decodes one JSON object a line.
func ndjson(t *testing.T, s string) []map[string]any {
	t.Helper()
	out := []map[string]any{}
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

// Decisions made over HTTP are read back from GET /v1/decisions two at a
// time, following next_cursor, and the NDJSON export of the stopped
// sidecar's log holds the same records, each a decision-log event OPA's own
// decoder reads.
func TestDecisionsExportRoundTripsTheAPI(t *testing.T) {
	dir := t.TempDir()
	st, err := devstack.Start(context.Background(), devstack.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	seedDecisions(t, st)

	var api []map[string]any
	var sizes []int
	for path := "/v1/decisions?limit=2"; ; {
		status, body := apiCall(t, st, http.MethodGet, path, "ops-ida", nil)
		var page struct {
			Decisions  []map[string]any `json:"decisions"`
			NextCursor string           `json:"next_cursor"`
		}
		if err := json.Unmarshal(body, &page); status != http.StatusOK || err != nil {
			t.Fatalf("GET %s: %d %v %s", path, status, err, body)
		}
		api = append(api, page.Decisions...)
		sizes = append(sizes, len(page.Decisions))
		if page.NextCursor == "" || len(sizes) > 6 {
			break
		}
		path = "/v1/decisions?limit=2&cursor=" + url.QueryEscape(page.NextCursor)
	}
	if fmt.Sprint(sizes) != "[2 2 2]" {
		t.Fatalf("pages of %v decisions, want [2 2 2]", sizes)
	}

	// While the sidecar runs it holds the store: the command says what to do.
	if _, err := runDecisions(t, "export", "--data", dir, "--lock-timeout", "50ms"); err == nil || !strings.Contains(err.Error(), "is locked") || !strings.Contains(err.Error(), "GET /v1/decisions") {
		t.Errorf("export beside a running sidecar: %v, want it locked and how to proceed", err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	file := filepath.Join(t.TempDir(), "decisions.ndjson")
	out, err := runDecisions(t, "export", "--data", dir, "-o", file)
	if err != nil || !strings.Contains(out, "wrote 6 decisions to "+file) {
		t.Fatalf("export: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if exported := ndjson(t, string(raw)); !reflect.DeepEqual(exported, api) {
		t.Errorf("the export differs from the API:\nexport %v\napi    %v", exported, api)
	}
	for i, line := range bytes.Split(bytes.TrimSpace(raw), []byte("\n")) {
		var ev logs.EventV1
		if err := json.Unmarshal(line, &ev); err != nil {
			t.Fatalf("line %d as OPA's decision-log event: %v", i+1, err)
		}
		result, _ := (*ev.Result).(map[string]any)
		if ev.DecisionID == "" || ev.Path != "countersign/call/decision" || ev.Input == nil || result["decision"] == nil ||
			result["rule"] == nil || ev.Bundles["countersign"].Revision != "p1" || ev.Timestamp.IsZero() {
			t.Errorf("line %d as OPA reads it: %+v", i+1, ev)
		}
	}

	// The filters select from the same records.
	since := api[2]["timestamp"].(string)
	for _, tc := range []struct {
		args []string
		want []map[string]any
	}{
		{[]string{"--workflow", "W2"}, api[3:]},
		{[]string{"--since", since}, api[2:]},
		{[]string{"--until", since}, api[:2]},
		{[]string{"--since", since, "--until", since}, []map[string]any{}},
	} {
		out, err := runDecisions(t, append([]string{"export", "--data", dir}, tc.args...)...)
		if err != nil {
			t.Fatalf("export %v: %v", tc.args, err)
		}
		if got := ndjson(t, out); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("export %v: %d decisions, want %d:\n%s", tc.args, len(got), len(tc.want), out)
		}
	}
}

func TestDecisionsExportRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no data", []string{"export"}, "say where the log is: --data DIR"},
		{"not a data dir", []string{"export", "--data", t.TempDir()}, "no sidecar.db in"},
		{"a since that is not a time", []string{"export", "--data", t.TempDir(), "--since", "yesterday"}, `--since "yesterday" is not an RFC 3339 time`},
		{"an until that is not a time", []string{"export", "--data", t.TempDir(), "--until", "2026-11-29"}, `--until "2026-11-29" is not an RFC 3339 time`},
		{"an argument", []string{"export", "--data", t.TempDir(), "now"}, "unknown command"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := runDecisions(t, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want it to mention %q", err, tc.want)
			}
		})
	}
}
