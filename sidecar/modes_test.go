package sidecar_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/countersign/countersign/cmd/devstack"
)

// modeView is GET /v1/modes's view of one tool.
type modeView struct {
	Tool     string `json:"tool"`
	Mode     string `json:"mode"`
	Default  string `json:"default"`
	SetBy    string `json:"set_by"`
	Reason   string `json:"reason"`
	Breakers []struct {
		AgentVersion string `json:"agent_version"`
		Failures     int    `json:"failures"`
		Tripped      bool   `json:"tripped"`
		Trip         *struct {
			Failures      int    `json:"failures"`
			WindowSeconds int64  `json:"window_seconds"`
			Last          string `json:"last"`
		} `json:"trip"`
	} `json:"breakers"`
}

func (e *env) mode(t *testing.T, name string) modeView {
	t.Helper()
	var all struct{ Modes []modeView }
	r := e.call(t, http.MethodGet, "/v1/modes", "ops-ida", nil)
	r.want(t, http.StatusOK, "")
	r.decode(t, &all)
	for _, m := range all.Modes {
		if m.Tool == name {
			return m
		}
	}
	t.Fatalf("GET /v1/modes has no %s: %s", name, r.body)
	return modeView{}
}

func (e *env) setMode(t *testing.T, name, mode, reason string) modeView {
	t.Helper()
	r := e.call(t, http.MethodPut, "/v1/modes/"+name, "ops-ida", map[string]string{"mode": mode, "reason": reason})
	r.want(t, http.StatusOK, "")
	var m modeView
	r.decode(t, &m)
	return m
}

// openAs creates workflow id for rep who, declaring agent version v.
func (e *env) openAs(t *testing.T, who, id, v string) {
	t.Helper()
	e.call(t, http.MethodPost, "/v1/workflows", who, map[string]string{"ticket": "T-" + id, "id": id, "agent_version": v}).
		want(t, http.StatusCreated, "")
}

func (e *env) metric(t *testing.T, line string) bool {
	t.Helper()
	res, err := e.client.Get(e.st.Endpoints.Sidecar + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return strings.Contains(string(b), line)
}

// Agent version v2 proposes out-of-region refunds until its breaker
// trips: its next in-policy refund waits for a lead (mode-approval-only),
// v1 is unaffected, the trip is in the audit and the metrics, it survives
// a restart, the approval then works like any other, and an operator's
// PUT /v1/modes resets it.
func TestBreakerTripsOneAgentVersionAndSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	e := start(t, devstack.Options{DataDir: dir})
	e.openAs(t, "rep-ana", "W-bad", "v2")
	for i := range 5 {
		r, s := e.propose(t, "rep-ana", "W-bad", "issue_refund", refund("O-1003", int64(1000+i)))
		r.want(t, http.StatusForbidden, "policy_denied")
		if s.Rule != "R2-order-outside-region" {
			t.Fatalf("bad proposal %d: rule %s, want R2-order-outside-region", i+1, s.Rule)
		}
	}
	m := e.mode(t, "issue_refund")
	if m.Mode != "auto" || len(m.Breakers) != 1 || !m.Breakers[0].Tripped || m.Breakers[0].AgentVersion != "v2" ||
		m.Breakers[0].Trip == nil || m.Breakers[0].Trip.Failures != 5 || m.Breakers[0].Trip.WindowSeconds != 600 ||
		m.Breakers[0].Trip.Last != "policy_denied R2-order-outside-region" {
		t.Fatalf("modes after five denials: %+v", m)
	}
	if !e.metric(t, `countersign_breaker_trips_total{agent_version="v2",tool="issue_refund"} 1`) {
		t.Error("no countersign_breaker_trips_total for v2's issue_refund")
	}

	e.openAs(t, "rep-ana", "W-v2", "v2")
	r, held := e.propose(t, "rep-ana", "W-v2", "issue_refund", refund("O-1001", 3000))
	r.want(t, http.StatusAccepted, "")
	if held.Status != "waiting_approval" || held.Rule != "mode-approval-only" || held.Approval == nil {
		t.Fatalf("v2's in-policy $30 refund after the trip: %s", r.body)
	}
	e.openAs(t, "rep-ana", "W-v1", "v1")
	r, s := e.propose(t, "rep-ana", "W-v1", "issue_refund", refund("O-1005", 2000))
	r.want(t, http.StatusOK, "")
	if s.Status != "done" {
		t.Fatalf("v1's $20 refund: %s, want done", r.body)
	}

	if err := e.st.Close(); err != nil {
		t.Fatal(err)
	}
	e = start(t, devstack.Options{DataDir: dir})
	if m := e.mode(t, "issue_refund"); len(m.Breakers) != 1 || !m.Breakers[0].Tripped {
		t.Fatalf("after restart the breaker is %+v, want v2 tripped", m.Breakers)
	}
	r, s = e.propose(t, "rep-ana", "W-v2", "issue_refund", refund("O-1002", 2500))
	if r.status != http.StatusAccepted || s.Rule != "mode-approval-only" {
		t.Fatalf("v2's refund after restart: %d %s, want 202 mode-approval-only", r.status, r.body)
	}
	e.call(t, http.MethodPost, "/v1/approvals/"+held.Approval.ID+"/approve", "lead-dee", nil).want(t, http.StatusOK, "")
	if w := e.resume(t, "rep-ana", "W-v2"); w.Steps[0].Status != "done" || w.Steps[1].Status != "waiting_approval" {
		t.Fatalf("after approving step 1 and resuming: %+v", w.Steps)
	}

	m = e.setMode(t, "issue_refund", "auto", "v2's region handling reviewed")
	if m.Mode != "auto" || m.SetBy != "ops-ida" || len(m.Breakers) != 0 {
		t.Fatalf("after the reset: %+v", m)
	}
	e.openAs(t, "rep-ana", "W-v2b", "v2")
	if r, s := e.propose(t, "rep-ana", "W-v2b", "issue_refund", refund("O-1001", 1500)); r.status != http.StatusOK || s.Status != "done" {
		t.Fatalf("v2's refund after the reset: %d %s, want done", r.status, r.body)
	}
	var page struct {
		Records []struct {
			Kind   string         `json:"kind"`
			Actor  string         `json:"actor"`
			Detail map[string]any `json:"detail"`
		} `json:"records"`
	}
	e.call(t, http.MethodGet, "/v1/audit?limit=1000", "ops-ida", nil).decode(t, &page)
	kinds := map[string]map[string]any{}
	for _, rec := range page.Records {
		kinds[rec.Kind] = rec.Detail
	}
	if d := kinds["breaker"]; d == nil || d["agent_version"] != "v2" {
		t.Errorf("no breaker record for v2 in the audit: %v", d)
	}
	if d := kinds["mode"]; d == nil || d["reason"] != "v2's region handling reviewed" || d["mode"] != "auto" {
		t.Errorf("no mode record with the reason in the audit: %v", d)
	}
}

// In approval_only every call the policy allows waits for a lead, a DENY
// stays a DENY; only an operator sets a mode, to one of the three.
func TestApprovalOnlyMode(t *testing.T) {
	e := start(t, devstack.Options{})
	e.setMode(t, "issue_refund", "approval_only", "first week")
	e.open(t, "rep-ana", "W1")
	r, s := e.propose(t, "rep-ana", "W1", "issue_refund", refund("O-1001", 1000))
	if r.status != http.StatusAccepted || s.Status != "waiting_approval" || s.Decision != "REQUIRE_APPROVAL" || s.Rule != "mode-approval-only" {
		t.Fatalf("$10 refund in approval_only: %d %s", r.status, r.body)
	}
	e.propose(t, "rep-ana", "W1", "issue_refund", refund("O-1003", 1000))
	if r, s := e.propose(t, "rep-ana", "W1", "issue_refund", refund("O-1003", 1000)); r.status != http.StatusOK || s.Status != "suppressed" {
		t.Fatalf("repeat: %d %s", r.status, r.body)
	}
	e.call(t, http.MethodPut, "/v1/modes/issue_refund", "ops-ida", map[string]string{"mode": "manual"}).want(t, http.StatusUnprocessableEntity, "invalid_request")
	e.call(t, http.MethodPut, "/v1/modes/send_email", "ops-ida", map[string]string{"mode": "auto"}).want(t, http.StatusNotFound, "unknown_tool")
	e.call(t, http.MethodPut, "/v1/modes/issue_refund", "rep-ana", map[string]string{"mode": "auto"}).want(t, http.StatusForbidden, "")
	e.call(t, http.MethodGet, "/v1/modes", "lead-dee", nil).want(t, http.StatusForbidden, "")
	if w := e.getWorkflow(t, "rep-ana", "W1"); w.Steps[1].Status != "denied" || w.Steps[1].Rule != "R2-order-outside-region" {
		t.Fatalf("out-of-region refund in approval_only: %+v, want denied by R2", w.Steps[1])
	}
}

// In shadow a call is decided as in production and answered 200
// shadowed with the decision that would have applied: nothing is paid,
// no approval is requested, no headroom is spent, the decision log marks
// it; the shadow period survives a restart.
func TestShadowModeSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	e := start(t, devstack.Options{DataDir: dir})
	e.setMode(t, "issue_refund", "shadow", "new agent")
	e.openAs(t, "rep-ana", "W-s", "v1")
	r, s := e.propose(t, "rep-ana", "W-s", "issue_refund", refund("O-1001", 3000))
	if r.status != http.StatusOK || s.Status != "shadowed" || s.Decision != "ALLOW" {
		t.Fatalf("$30 refund in shadow: %d %s", r.status, r.body)
	}
	if err := e.st.Close(); err != nil {
		t.Fatal(err)
	}
	e = start(t, devstack.Options{DataDir: dir})
	if m := e.mode(t, "issue_refund"); m.Mode != "shadow" || m.Reason != "new agent" {
		t.Fatalf("after restart: %+v, want shadow", m)
	}
	r, s = e.propose(t, "rep-ana", "W-s", "issue_refund", refund("O-1002", 12000))
	if r.status != http.StatusOK || s.Status != "shadowed" || s.Decision != "REQUIRE_APPROVAL" || s.Approval != nil {
		t.Fatalf("$120 refund in shadow after restart: %d %s", r.status, r.body)
	}
	var pending struct{ Approvals []approval }
	e.call(t, http.MethodGet, "/v1/approvals?status=pending", "lead-dee", nil).decode(t, &pending)
	if len(pending.Approvals) != 0 {
		t.Errorf("shadow requested approvals: %+v", pending.Approvals)
	}
	e.wantLedger(t, 0)
	var log struct {
		Decisions []struct {
			Shadow       bool   `json:"shadow"`
			Mode         string `json:"mode"`
			AgentVersion string `json:"agent_version"`
		} `json:"decisions"`
	}
	e.call(t, http.MethodGet, "/v1/decisions?workflow=W-s", "ops-ida", nil).decode(t, &log)
	if len(log.Decisions) != 2 || !log.Decisions[0].Shadow || log.Decisions[1].Mode != "shadow" || log.Decisions[0].AgentVersion != "v1" {
		t.Fatalf("decision log %+v, want two shadow decisions of v1", log.Decisions)
	}
	// The shadowed $30 spent no headroom: $45 more on O-1001 is still
	// under the $50 auto limit once the tool is auto.
	e.setMode(t, "issue_refund", "auto", "shadow period over")
	e.openAs(t, "rep-ana", "W-a", "v1")
	if r, s := e.propose(t, "rep-ana", "W-a", "issue_refund", refund("O-1001", 4500)); r.status != http.StatusOK || s.Status != "done" {
		t.Fatalf("$45 refund in auto after a shadowed $30: %d %s", r.status, r.body)
	}
	if w := e.getWorkflow(t, "rep-ana", "W-s"); w.Status != "done" {
		t.Errorf("a workflow of shadowed steps is %s, want done", w.Status)
	}
}

// The shadow report sets the shadowed proposals beside what a clerk did in
// the ledger for the same orders: agreement, the agent would have paid
// and nobody did, and the reverse.
func TestShadowReport(t *testing.T) {
	e := start(t, devstack.Options{})
	e.setMode(t, "issue_refund", "shadow", "compare with the clerks")
	e.openAs(t, "rep-ana", "W-s", "v1")
	for _, p := range []struct {
		order  string
		amount int64
	}{{"O-1001", 3000}, {"O-1002", 12000}, {"O-1003", 2000}} {
		if r, _ := e.propose(t, "rep-ana", "W-s", "issue_refund", refund(p.order, p.amount)); r.status != http.StatusOK {
			t.Fatalf("shadowed refund of %s: %d %s", p.order, r.status, r.body)
		}
	}
	for _, x := range []map[string]any{{"order": "O-1001", "amount": 3000, "by": "clerk-kim"}, {"order": "O-1003", "amount": 2000, "by": "clerk-kim"}} {
		e.sim(t, http.MethodPost, e.st.Endpoints.Ledger+"/_sim/external-entries", x, http.StatusCreated)
	}
	var r struct {
		Proposals int `json:"proposals"`
		Agreement int `json:"agreement"`
		Would     []struct {
			Order    string `json:"order"`
			Proposed int64  `json:"proposed"`
		} `json:"would_have_paid_nothing_paid"`
		Reverse []struct {
			Order string   `json:"order"`
			Paid  int64    `json:"paid"`
			By    []string `json:"by"`
		} `json:"paid_would_not_have"`
	}
	e.call(t, http.MethodGet, "/v1/shadow/report", "ops-ida", nil).decode(t, &r)
	if r.Proposals != 3 || r.Agreement != 1 || len(r.Would) != 1 || r.Would[0].Order != "O-1002" || r.Would[0].Proposed != 12000 ||
		len(r.Reverse) != 1 || r.Reverse[0].Order != "O-1003" || r.Reverse[0].Paid != 2000 || r.Reverse[0].By[0] != "clerk-kim" {
		t.Fatalf("shadow report %+v", r)
	}
	e.call(t, http.MethodGet, "/v1/shadow/report", "lead-dee", nil).want(t, http.StatusForbidden, "")
}
