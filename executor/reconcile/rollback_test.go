package reconcile_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/bundles"
	"github.com/countersign/countersign/executor/monitor"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/reconcile"
)

// send makes one request as who with a raw body and returns the status
// and the body.
func (a agent) send(who, method, path, contentType string, body []byte) (int, []byte) {
	a.t.Helper()
	req, err := http.NewRequest(method, a.st.Endpoints.Sidecar+path, bytes.NewReader(body))
	if err != nil {
		a.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+a.st.Tokens[who])
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	res, err := a.hc.Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	if err != nil {
		a.t.Fatal(err)
	}
	return res.StatusCode, out
}

// activeDigest is the digest of the bundle in force, as the API shows it.
func (a agent) activeDigest() string {
	a.t.Helper()
	code, body := a.send("ops-ida", http.MethodGet, "/v1/bundles/active", "", nil)
	var b struct {
		Revision string `json:"revision"`
		Digest   string `json:"digest"`
	}
	if err := json.Unmarshal(body, &b); code != http.StatusOK || err != nil || b.Digest == "" {
		a.t.Fatalf("GET /v1/bundles/active: %d %s", code, body)
	}
	return b.Digest
}

// raisedAuto is p1's policy (rego/) with refund_auto raised from $50.00
// to cents, the change declared: a loosening, which needs two operators.
func raisedAuto(t *testing.T, revision string, cents int64) []byte {
	t.Helper()
	p1, err := bundles.Open("p1")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := fs.ReadFile(p1, "data.json")
	if err != nil {
		t.Fatal(err)
	}
	var data map[string]map[string]map[string]any
	if err := json.Unmarshal(raw, &data); err != nil {
		t.Fatal(err)
	}
	data["countersign"]["limits"]["refund_auto"] = cents
	raw, err = json.Marshal(data)
	if err != nil {
		t.Fatal(err)
	}
	src, err := policy.Source(os.DirFS(filepath.Join("..", "..", "rego")), raw, revision,
		[]policy.LimitChange{{Name: "refund_auto", From: 5000, To: cents}})
	if err != nil {
		t.Fatal(err)
	}
	archive, err := policy.Build(src)
	if err != nil {
		t.Fatal(err)
	}
	return archive
}

// exemptsBen is p1 with rep-ben exempted from R7 (the approval above the
// auto limit), its limits unchanged: a rule that lets refunds through
// above the bundle's own auto limit.
func exemptsBen(t *testing.T) []byte {
	t.Helper()
	const r7 = "} else := require_approval(\"R7-refund-needs-approval\") if {\n\tnot within_auto_refund\n"
	fsys, err := bundles.Variant("p1", "p1-ben", func(s string) string {
		if !strings.Contains(s, r7) {
			t.Fatal("call.rego has no R7 to edit")
		}
		return strings.Replace(s, r7, r7+"\tinput.user.id != \"rep-ben\"\n", 1)
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	archive, err := policy.Build(fsys)
	if err != nil {
		t.Fatal(err)
	}
	return archive
}

// activate uploads archive as ops-ida and, when it waits for a second
// operator, has ops-jon approve it.
func (a agent) activate(query string, archive []byte) {
	a.t.Helper()
	code, body := a.send("ops-ida", http.MethodPost, "/v1/bundles"+query, "application/gzip", archive)
	if code == http.StatusCreated {
		return
	}
	var awaiting struct {
		Status string `json:"status"`
		Digest string `json:"digest"`
	}
	if err := json.Unmarshal(body, &awaiting); code != http.StatusAccepted || err != nil || awaiting.Status != "awaiting_second_operator" {
		a.t.Fatalf("uploading a bundle: %d %s", code, body)
	}
	if code, body := a.send("ops-jon", http.MethodPost, "/v1/bundles/"+awaiting.Digest+"/approve", "", nil); code != http.StatusCreated {
		a.t.Fatalf("ops-jon approving %s: %d %s", awaiting.Digest, code, body)
	}
}

// A refund that a since-rolled-back bundle allowed within its own auto
// limit is no finding and no alert: it is judged against the limits of
// the bundle that decided it, which two operators put in force, not
// against the limits in force when reconciliation or the monitor runs.
// After the same rollback, a refund above the deciding bundle's own auto
// limit (a rule let it through) stays a finding and an alert, and so does
// one a break-glass release let through: the gate did not vouch for that
// bundle's limits. Everything goes through the API, over HTTP.
func TestRefundJudgedByTheBundleThatDecidedIt(t *testing.T) {
	ctx := context.Background()
	st := startStack(t, t.TempDir(), nil)
	a := agent{t: t, st: st, hc: &http.Client{Timeout: 30 * time.Second}}
	p1 := a.activeDigest()

	// p1-raised: refund_auto $75.00, proposed by ops-ida, approved by
	// ops-jon; under it rep-ana refunds $70.00 with no approval.
	code, body := a.send("ops-ida", http.MethodPost, "/v1/bundles", "application/gzip", raisedAuto(t, "p1-raised", 7500))
	var awaiting struct {
		Status string `json:"status"`
		Digest string `json:"digest"`
	}
	if err := json.Unmarshal(body, &awaiting); code != http.StatusAccepted || err != nil || awaiting.Status != "awaiting_second_operator" {
		t.Fatalf("uploading a raised refund_auto: %d %s, want 202 awaiting_second_operator", code, body)
	}
	if code, body := a.send("ops-jon", http.MethodPost, "/v1/bundles/"+awaiting.Digest+"/approve", "", nil); code != http.StatusCreated {
		t.Fatalf("ops-jon approving p1-raised: %d %s", code, body)
	}
	a.done("rep-ana", "W-raised", "issue_refund", refundArgs("O-1002", 7000))

	// Back to p1. Its limits are tighter, but p1-raised was built from
	// rego/, whose rules (R12, B1-B4) p1 lacks: dropping rules is not a
	// pure tightening, so ops-ida proposes the rollback and ops-jon
	// approves it.
	code, body = a.send("ops-ida", http.MethodPost, "/v1/bundles/"+p1+"/activate", "", nil)
	if code != http.StatusAccepted {
		t.Fatalf("rolling back to p1: %d %s, want 202 awaiting_second_operator", code, body)
	}
	if code, body := a.send("ops-jon", http.MethodPost, "/v1/bundles/"+p1+"/approve", "", nil); code != http.StatusCreated {
		t.Fatalf("ops-jon approving the rollback to p1: %d %s", code, body)
	}
	// Under p1 again, a $70.00 refund waits for a lead.
	if code, status := a.step("rep-ana", "W-after", "issue_refund", refundArgs("O-1002", 7000)); code != http.StatusAccepted || status != "waiting_approval" {
		t.Fatalf("$70.00 under p1 after the rollback: %d %s, want 202 waiting_approval", code, status)
	}

	// p1-ben exempts rep-ben from R7 at p1's limits: his $80.00 runs with
	// no approval, above the bundle's own $50.00.
	a.activate("", exemptsBen(t))
	a.done("rep-ben", "W-ben", "issue_refund", refundArgs("O-1004", 8000))

	// A break-glass release of p2 lets $120.00 through; back to p1.
	a.activate("?break_glass=true&reason=incident", loadBundle(t, "p2").Archive())
	a.done("rep-ana", "W-p2", "issue_refund", refundArgs("O-1001", 12000))
	if code, body := a.send("ops-ida", http.MethodPost, "/v1/bundles/"+p1+"/activate", "", nil); code != http.StatusCreated {
		t.Fatalf("rolling back to p1: %d %s", code, body)
	}

	code, body = a.send("ops-ida", http.MethodPost, "/v1/reconciliations", "", nil)
	var r reconcile.Report
	if err := json.Unmarshal(body, &r); code != http.StatusOK || err != nil {
		t.Fatalf("POST /v1/reconciliations: %d %s", code, body)
	}
	t.Logf("reconciliation:\n%s", r.Table())
	over := r.Findings.RefundOverLimitWithoutApproval
	if len(over) != 2 || over[0].StepRef != ref("W-ben", 1, "O-1004") || over[1].StepRef != ref("W-p2", 1, "O-1001") {
		t.Fatalf("refund_over_limit_without_approval %+v, want W-ben/1 and W-p2/1", over)
	}
	if o := over[0]; o.Limit != 5000 || o.Revision != "p1-ben" || o.Note != "" {
		t.Errorf("the W-ben finding %+v: want it held to p1-ben's own $50.00", o)
	}
	if o := over[1]; o.Limit != 5000 || o.Revision != "p2" || !strings.Contains(o.Note, "breaking the glass") {
		t.Errorf("the W-p2 finding %+v: want it held to $50.00, naming p2 and why its own limit was not used", o)
	}
	if r.Count(reconcile.Matched) != 3 || r.Unexplained != 2 {
		t.Errorf("matched %d, unexplained %d; want the three refunds matched and two findings", r.Count(reconcile.Matched), r.Unexplained)
	}

	alerts, err := st.Monitor.Check(ctx)
	if err != nil {
		t.Fatal(err)
	}
	alerted := map[string]monitor.Violation{}
	for _, al := range alerts {
		if al.Kind != monitor.KindInvariant {
			continue
		}
		for _, v := range al.Steps {
			alerted[v.Workflow] = v
		}
	}
	if ben, p2 := alerted["W-ben"], alerted["W-p2"]; len(alerted) != 2 || ben.Limit != 5000 || ben.Revision != "p1-ben" ||
		p2.Limit != 5000 || p2.Revision != "p2" || !strings.Contains(p2.Note, "breaking the glass") {
		t.Errorf("the monitor alerted %+v, want W-ben held to p1-ben's $50.00 and W-p2 held to $50.00 for breaking the glass", alerted)
	}
}
