package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/countersign/countersign/cmd/devstack"
	"github.com/countersign/countersign/executor/effectiveness"
)

// The controls' record is counted per tool and agent version from what
// happened over HTTP, and the API, /metrics and the command of the stopped
// sidecar agree.
func TestEffectivenessReport(t *testing.T) {
	dir := t.TempDir()
	st, err := devstack.Start(context.Background(), devstack.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			st.Close()
		}
	}()
	call := func(method, path, who string, body any, want int) []byte {
		t.Helper()
		status, b := apiCall(t, st, method, path, who, body)
		if status != want {
			t.Fatalf("%s %s: %d, want %d: %s", method, path, status, want, b)
		}
		return b
	}
	refund := func(order string, amount int64) map[string]any {
		return map[string]any{"tool": "issue_refund", "args": map[string]any{"order": order, "amount": amount}}
	}
	call(http.MethodPost, "/v1/workflows", "rep-ana", map[string]any{"id": "W-v1", "ticket": "T-1", "agent_version": "v1"}, http.StatusCreated)
	call(http.MethodPost, "/v1/workflows", "rep-ana", map[string]any{"id": "W-v2", "ticket": "T-2", "agent_version": "v2"}, http.StatusCreated)
	steps := "/v1/workflows/W-v1/steps"
	call(http.MethodPost, steps, "rep-ana", refund("O-1001", 3000), http.StatusOK)         // done
	call(http.MethodPost, steps, "rep-ana", refund("O-1001", 3000), http.StatusOK)         // the same call: suppressed
	call(http.MethodPost, steps, "rep-ana", refund("O-1003", 2000), http.StatusForbidden)  // R2
	call(http.MethodPost, steps, "rep-ana", refund("O-1001", 15000), http.StatusForbidden) // R4
	call(http.MethodPost, steps, "rep-ana", map[string]any{"tool": "issue_refund", "args": map[string]any{"order": "O-1002", "amount": "12"}}, http.StatusUnprocessableEntity)
	var waiting []struct {
		Approval struct{ ID string } `json:"approval"`
	}
	for _, amount := range []int64{12000, 9000} {
		var s struct {
			Approval struct{ ID string } `json:"approval"`
		}
		if err := json.Unmarshal(call(http.MethodPost, steps, "rep-ana", refund("O-1002", amount), http.StatusAccepted), &s); err != nil {
			t.Fatal(err)
		}
		waiting = append(waiting, s)
	}
	call(http.MethodPost, "/v1/approvals/"+waiting[0].Approval.ID+"/approve", "lead-dee", nil, http.StatusOK)
	call(http.MethodPost, "/v1/approvals/"+waiting[1].Approval.ID+"/reject", "lead-dee", nil, http.StatusOK)
	call(http.MethodPost, "/v1/workflows/W-v2/steps", "rep-ana", refund("O-1001", 2000), http.StatusOK)

	want := map[string]effectiveness.Row{
		"v1": {Tool: "issue_refund", AgentVersion: "v1", Proposals: 7, SchemaRejections: 1, DuplicatesSuppressed: 1,
			Denials:   map[string]int{"R2-order-outside-region": 1, "R4-exceeds-amount-paid": 1},
			Approvals: effectiveness.Approvals{Requested: 2, Approved: 1, Rejected: 1, OverturnRate: 0.5}},
		"v2": {Tool: "issue_refund", AgentVersion: "v2", Proposals: 1, Denials: map[string]int{}},
	}
	check := func(where string, r effectiveness.Report) {
		t.Helper()
		if len(r.Rows) != 2 {
			t.Fatalf("%s: rows %+v, want issue_refund under v1 and v2", where, r.Rows)
		}
		for _, got := range r.Rows {
			w := want[got.AgentVersion]
			got.Approvals.P50SecondsToApproval = 0 // a wall-clock figure; checked below
			b1, _ := json.Marshal(got)
			b2, _ := json.Marshal(w)
			if !bytes.Equal(b1, b2) {
				t.Errorf("%s, %s:\n got %s\nwant %s", where, got.AgentVersion, b1, b2)
			}
		}
	}
	var api effectiveness.Report
	if err := json.Unmarshal(call(http.MethodGet, "/v1/effectiveness", "lead-dee", nil, http.StatusOK), &api); err != nil {
		t.Fatal(err)
	}
	check("GET /v1/effectiveness", api)
	call(http.MethodGet, "/v1/effectiveness?since=yesterday", "ops-ida", nil, http.StatusBadRequest)
	call(http.MethodGet, "/v1/effectiveness", "rep-ana", nil, http.StatusForbidden)
	var later effectiveness.Report
	if err := json.Unmarshal(call(http.MethodGet, "/v1/effectiveness?since=2999-01-01T00:00:00Z", "ops-ida", nil, http.StatusOK), &later); err != nil || len(later.Rows) != 0 {
		t.Errorf("since the year 2999: %+v %v, want no rows", later, err)
	}

	res, err := http.Get(st.Endpoints.Sidecar + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(res.Body)
	res.Body.Close()
	for _, line := range []string{
		`countersign_effectiveness_proposals{agent_version="v1",tool="issue_refund"} 7`,
		`countersign_effectiveness_denials{agent_version="v1",rule="R2-order-outside-region",tool="issue_refund"} 1`,
		`countersign_effectiveness_approvals{agent_version="v1",outcome="rejected",tool="issue_refund"} 1`,
		`countersign_effectiveness_overturn_rate{agent_version="v1",tool="issue_refund"} 0.5`,
		`countersign_effectiveness_schema_rejections{agent_version="v1",tool="issue_refund"} 1`,
	} {
		if !strings.Contains(string(metrics), line+"\n") {
			t.Errorf("/metrics lacks %s", line)
		}
	}

	st.Close()
	closed = true
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs([]string{"effectiveness", "--data", dir, "--json"})
	if err := root.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	var cli effectiveness.Report
	if err := json.Unmarshal(out.Bytes(), &cli); err != nil {
		t.Fatal(err)
	}
	check("countersign effectiveness", cli)
	if cli.Rows[0].Approvals.P50SecondsToApproval <= 0 {
		t.Errorf("p50 to approval %v", cli.Rows[0].Approvals.P50SecondsToApproval)
	}
}
