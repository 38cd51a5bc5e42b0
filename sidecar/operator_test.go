package sidecar_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/countersign/countersign/bundles"
	"github.com/countersign/countersign/cmd/devstack"
	"github.com/countersign/countersign/executor/policy"
)

// Raising the epoch rotates the signing key: the JWKS publishes only the new
// one, and refunds go on with tokens of the new epoch.
func TestCredentialEpoch(t *testing.T) {
	e := start(t, devstack.Options{})
	if kids := jwksKids(t, e); !slices.Equal(kids, []string{"epoch-1"}) {
		t.Fatalf("JWKS kids %v, want [epoch-1]", kids)
	}
	r := e.call(t, http.MethodPost, "/v1/credentials/epoch", "ops-ida", nil)
	r.want(t, http.StatusOK, "")
	var got struct{ Epoch int }
	r.decode(t, &got)
	if got.Epoch != 2 {
		t.Errorf("epoch %s, want 2", r.body)
	}
	if kids := jwksKids(t, e); !slices.Equal(kids, []string{"epoch-2"}) {
		t.Errorf("JWKS kids %v after the raise, want only [epoch-2]", kids)
	}
	e.open(t, "rep-ana", "W-epoch")
	res, _ := e.propose(t, "rep-ana", "W-epoch", "issue_refund", refund("O-1001", 3000))
	res.want(t, http.StatusOK, "")
	e.wantLedger(t, 1)
}

// A switched-off tool holds the step at execution; the other tools go on,
// and switching it back on lets resume finish the step.
func TestSwitches(t *testing.T) {
	e := start(t, devstack.Options{})
	switches := func() map[string]bool {
		var sw struct{ Switches map[string]bool }
		e.call(t, http.MethodGet, "/v1/switches", "ops-ida", nil).decode(t, &sw)
		return sw.Switches
	}
	if sw := switches(); !sw["issue_refund"] || !sw["lookup_order"] || !sw["reship_order"] || len(sw) != 3 {
		t.Fatalf("switches %v, want the three tools on", sw)
	}
	set := func(tool, body string) reply {
		h := http.Header{"Authorization": {"Bearer " + e.st.Tokens["ops-ida"]}, "Content-Type": {"application/json"}}
		return e.send(t, http.MethodPut, "/v1/switches/"+tool, h, strings.NewReader(body))
	}
	set("issue_refund", `{"enabled":false}`).want(t, http.StatusOK, "")
	if sw := switches(); sw["issue_refund"] || !sw["lookup_order"] {
		t.Errorf("switches %v, want issue_refund off and lookup_order on", sw)
	}
	set("delete_customer", `{"enabled":false}`).want(t, http.StatusNotFound, "unknown_tool")
	set("issue_refund", `{"enabled":"no"}`).want(t, http.StatusUnprocessableEntity, "")
	set("issue_refund", `{}`).want(t, http.StatusUnprocessableEntity, "")

	e.open(t, "rep-ana", "W-switch")
	r, s := e.propose(t, "rep-ana", "W-switch", "issue_refund", refund("O-1001", 3000))
	r.want(t, http.StatusAccepted, "")
	if s.Status != "held" {
		t.Errorf("refund step %s, want held", r.body)
	}
	r, _ = e.propose(t, "rep-ana", "W-switch", "lookup_order", map[string]string{"order": "O-1001"})
	r.want(t, http.StatusOK, "")
	if w := e.getWorkflow(t, "rep-ana", "W-switch"); w.Status != "paused" {
		t.Errorf("workflow %s, want paused", w.Status)
	}
	// Still off: resume holds it again.
	if w := e.resume(t, "rep-ana", "W-switch"); w.Steps[0].Status != "held" {
		t.Errorf("resumed while off: step %s, want held", w.Steps[0].Status)
	}
	e.wantLedger(t, 0)

	set("issue_refund", `{"enabled":true}`).want(t, http.StatusOK, "")
	if w := e.resume(t, "rep-ana", "W-switch"); w.Status != "done" || w.Steps[0].Status != "done" {
		t.Errorf("after re-enabling: workflow %s step %s, want done", w.Status, w.Steps[0].Status)
	}
	e.wantLedger(t, 1)

	// Mid-run: a step admitted while the tool was on, approved, and resumed
	// after the tool was switched off, is held at the moment of effect.
	e.open(t, "rep-ana", "W-midrun")
	r, s = e.propose(t, "rep-ana", "W-midrun", "issue_refund", refund("O-1002", 12000))
	r.want(t, http.StatusAccepted, "")
	if s.Approval == nil {
		t.Fatalf("no approval on %s", r.body)
	}
	e.call(t, http.MethodPost, "/v1/approvals/"+s.Approval.ID+"/approve", "lead-dee", nil).want(t, http.StatusOK, "")
	set("issue_refund", `{"enabled":false}`).want(t, http.StatusOK, "")
	if w := e.resume(t, "rep-ana", "W-midrun"); w.Steps[0].Status != "held" {
		t.Errorf("resumed after the switch-off: step %s, want held", w.Steps[0].Status)
	}
	e.wantLedger(t, 1)
	set("issue_refund", `{"enabled":true}`).want(t, http.StatusOK, "")
	if w := e.resume(t, "rep-ana", "W-midrun"); w.Steps[0].Status != "done" {
		t.Errorf("resumed after re-enabling: step %s, want done", w.Steps[0].Status)
	}
	e.wantLedger(t, 2)
}

type bundleRecord struct {
	Revision string `json:"revision"`
	Digest   string `json:"digest"`
	Status   string `json:"status"`
	By       string `json:"by"`
	Failures []struct {
		Case         string `json:"case"`
		Amount       *int64 `json:"amount"`
		Expected     string `json:"expected"`
		Got          string `json:"got"`
		ExpectedRule string `json:"expected_rule"`
		GotRule      string `json:"got_rule"`
	} `json:"failures"`
}

// digestOf is the digest of an embedded bundle's .tar.gz.
func digestOf(t *testing.T, name string) string {
	t.Helper()
	sum := sha256.Sum256(buildBundle(t, name))
	return hex.EncodeToString(sum[:])
}

// buildBundle makes the .tar.gz of an embedded bundle.
func buildBundle(t *testing.T, name string) []byte {
	t.Helper()
	fsys, err := bundles.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	b, err := policy.Build(fsys)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The gate refuses p2's units mistake, two undeclared limit changes, with
// exactly three failing cases at p1's limits ($51.00 and $500.00 allowed
// where approval is required, $501.00 allowed where it is denied) and
// leaves p1 in force; p3 passes it; break glass skips it.
func TestBundleGate(t *testing.T) {
	e := start(t, devstack.Options{})
	upload := func(name, query string) reply {
		h := http.Header{"Authorization": {"Bearer " + e.st.Tokens["ops-ida"]}, "Content-Type": {"application/gzip"}}
		return e.send(t, http.MethodPost, "/v1/bundles"+query, h, bytes.NewReader(buildBundle(t, name)))
	}
	active := func() bundleRecord {
		var b bundleRecord
		r := e.call(t, http.MethodGet, "/v1/bundles/active", "ops-ida", nil)
		r.want(t, http.StatusOK, "")
		r.decode(t, &b)
		return b
	}
	history := func() map[string]string {
		var h []bundleRecord
		e.call(t, http.MethodGet, "/v1/bundles", "ops-ida", nil).decode(t, &h)
		out := map[string]string{}
		for _, b := range h {
			out[b.Revision] += b.Status + " "
		}
		return out
	}
	if h := history(); h["p1"] != "active " || len(h) != 1 {
		t.Fatalf("history %v, want p1 active", h)
	}

	r := upload("p2", "")
	r.want(t, http.StatusUnprocessableEntity, "gate_failed")
	var rejected bundleRecord
	r.decode(t, &rejected)
	var fails []string
	for _, f := range rejected.Failures {
		amount := "no amount"
		if f.Amount != nil {
			amount = strconv.FormatInt(*f.Amount, 10)
		}
		fails = append(fails, f.Case+", "+amount+": "+f.Expected+" got "+f.Got)
	}
	want := []string{
		"limit_change_undeclared, no amount: refund_auto 5000 got refund_auto 500000 (undeclared)",
		"limit_change_undeclared, no amount: refund_max 50000 got refund_max 5000000 (undeclared)",
		"refund above the auto limit, 5100: REQUIRE_APPROVAL got ALLOW",
		"refund at the maximum, 50000: REQUIRE_APPROVAL got ALLOW",
		"refund above the maximum, 50100: DENY got ALLOW",
	}
	if !slices.Equal(fails, want) {
		t.Errorf("gate failures\n%s\nwant\n%s", strings.Join(fails, "\n"), strings.Join(want, "\n"))
	}
	if b := active(); b.Revision != "p1" || b.Status != "active" {
		t.Errorf("after the rejection the active bundle is %+v, want p1", b)
	}
	// The rejected bundle changed nothing: workflows still open under p1.
	var w workflow
	e.call(t, http.MethodPost, "/v1/workflows", "rep-ana", map[string]string{"ticket": "T-p1"}).decode(t, &w)
	if w.PolicyRevision != "p1" {
		t.Errorf("workflow opened under %q, want p1", w.PolicyRevision)
	}

	upload("p3", "").want(t, http.StatusCreated, "")
	if b := active(); b.Revision != "p3" || b.By != "ops-ida" {
		t.Errorf("active %+v, want p3 by ops-ida", b)
	}
	if h := history(); h["p1"] != "superseded " || h["p2"] != "rejected " || h["p3"] != "active " {
		t.Errorf("history %v, want p1 superseded, p2 rejected, p3 active", h)
	}

	upload("p2", "?break_glass=true").want(t, http.StatusUnprocessableEntity, "reason_required")
	upload("p2", "?break_glass=true&reason=drill").want(t, http.StatusAccepted, "")
	if b := active(); b.Revision != "p3" {
		t.Errorf("break glass by one operator activated %s; want p3 until a second approves", b.Revision)
	}
	e.call(t, http.MethodPost, "/v1/bundles/"+digestOf(t, "p2")+"/approve", "ops-ida", nil).want(t, http.StatusForbidden, "same_operator")
	e.call(t, http.MethodPost, "/v1/bundles/"+digestOf(t, "p2")+"/approve", "ops-jon", nil).want(t, http.StatusCreated, "")
	e.call(t, http.MethodPost, "/v1/bundles/"+digestOf(t, "p2")+"/approve", "ops-jon", nil).want(t, http.StatusConflict, "not_pending")
	e.call(t, http.MethodPost, "/v1/bundles/"+strings.Repeat("0", 64)+"/approve", "ops-jon", nil).want(t, http.StatusNotFound, "")
	if b := active(); b.Revision != "p2" {
		t.Errorf("after break glass the active bundle is %s, want p2", b.Revision)
	}

	// With p2 in force a $700 refund passes the policy, and the ledger
	// refuses it against the rep's $500 token ceiling.
	e.sim(t, http.MethodPost, e.st.Endpoints.Orders+"/_sim/orders",
		map[string]any{"id": "O-2001", "region": "EU", "customer": "customer-9", "paid": 100000, "status": "shipped"}, http.StatusCreated)
	e.open(t, "rep-ana", "W-ceiling")
	over, s := e.propose(t, "rep-ana", "W-ceiling", "issue_refund", refund("O-2001", 70000))
	over.want(t, http.StatusForbidden, "refused_downstream")
	if s.Decision != "ALLOW" || s.Status != "denied" {
		t.Errorf("$700 under p2: %s, want decision ALLOW and step denied by the ledger", over.body)
	}
	e.wantLedger(t, 0)

	// Not a bundle at all.
	h := http.Header{"Authorization": {"Bearer " + e.st.Tokens["ops-ida"]}, "Content-Type": {"application/gzip"}}
	e.send(t, http.MethodPost, "/v1/bundles", h, strings.NewReader("not a tarball")).want(t, http.StatusUnprocessableEntity, "")
	h.Set("Content-Type", "application/json")
	e.send(t, http.MethodPost, "/v1/bundles", h, bytes.NewReader(buildBundle(t, "p3"))).want(t, http.StatusBadRequest, "")
	if b := active(); b.Revision != "p2" {
		t.Errorf("bad uploads changed the active bundle to %s", b.Revision)
	}
}

// A case that pins its rule fails on the rule alone when the decision
// stays: p1 with R7 renamed R13 still requires approval above the auto
// limit, and the 422 and the rejected bundle's record name both rules, so
// that the failure does not read "expected REQUIRE_APPROVAL, got
// REQUIRE_APPROVAL".
func TestBundleGateNamesTheRules(t *testing.T) {
	e := start(t, devstack.Options{})
	fsys, err := bundles.Variant("p1", "p1-renamed", func(s string) string {
		return strings.ReplaceAll(s, "R7-refund-needs-approval", "R13-refund-needs-approval")
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	archive, err := policy.Build(fsys)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{"Authorization": {"Bearer " + e.st.Tokens["ops-ida"]}, "Content-Type": {"application/gzip"}}
	r := e.send(t, http.MethodPost, "/v1/bundles", h, bytes.NewReader(archive))
	r.want(t, http.StatusUnprocessableEntity, "gate_failed")
	var rejected bundleRecord
	r.decode(t, &rejected)
	var history []bundleRecord
	e.call(t, http.MethodGet, "/v1/bundles", "ops-ida", nil).decode(t, &history)
	if len(history) != 2 || history[1].Status != "rejected" {
		t.Fatalf("history %+v, want p1 and the rejected bundle", history)
	}
	want := "refund above the auto limit: REQUIRE_APPROVAL by R7-refund-needs-approval got REQUIRE_APPROVAL by R13-refund-needs-approval"
	for what, rec := range map[string]bundleRecord{"the 422's failures": rejected, "the rejected record's failures": history[1]} {
		var fails []string
		for _, f := range rec.Failures {
			fails = append(fails, f.Case+": "+f.Expected+" by "+f.ExpectedRule+" got "+f.Got+" by "+f.GotRule)
		}
		if len(fails) == 0 || fails[0] != want {
			t.Errorf("%s\n%s\nwant first\n%s", what, strings.Join(fails, "\n"), want)
		}
	}
}

// The operator's read of the records: the audit chain verifies, and a
// reconciliation matches the one refund against the ledger.
func TestAuditAndReconciliation(t *testing.T) {
	e := start(t, devstack.Options{})
	e.call(t, http.MethodGet, "/v1/reconciliations/latest", "ops-ida", nil).want(t, http.StatusNotFound, "")
	e.open(t, "rep-ana", "W-records")
	r, _ := e.propose(t, "rep-ana", "W-records", "issue_refund", refund("O-1001", 3000))
	r.want(t, http.StatusOK, "")

	for _, path := range []string{"/v1/audit", "/v1/audit/verify", "/v1/reconciliations/latest"} {
		e.call(t, http.MethodGet, path, "rep-ana", nil).want(t, http.StatusForbidden, "forbidden_role")
	}
	var verify struct {
		OK      bool `json:"ok"`
		Records int  `json:"records"`
	}
	v := e.call(t, http.MethodGet, "/v1/audit/verify", "ops-ida", nil)
	v.want(t, http.StatusOK, "")
	v.decode(t, &verify)
	if !verify.OK || verify.Records < 2 {
		t.Errorf("audit verify %s, want ok with the bundle and the decision at least", v.body)
	}

	var run, latest struct {
		Classes map[string]int `json:"classes"`
	}
	rr := e.call(t, http.MethodPost, "/v1/reconciliations", "ops-ida", nil)
	rr.want(t, http.StatusOK, "")
	rr.decode(t, &run)
	e.call(t, http.MethodGet, "/v1/reconciliations/latest", "ops-ida", nil).decode(t, &latest)
	for name, c := range map[string]map[string]int{"run": run.Classes, "latest": latest.Classes} {
		unexplained := 0
		for class, n := range c {
			if class != "matched" {
				unexplained += n
			}
		}
		if c["matched"] != 1 || unexplained != 0 || len(c) != 8 {
			t.Errorf("%s classes %v, want the eight classes with one matched and nothing else", name, c)
		}
	}
}
