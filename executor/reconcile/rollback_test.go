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

// A refund that a since-rolled-back bundle allowed within its own auto
// limit is no finding and no alert: it is judged against the limits of
// the bundle that decided it, which two operators put in force, not
// against the limits in force when reconciliation or the monitor runs. A
// refund that a break-glass release let through above the limit stays a
// finding and an alert after the same rollback: the gate did not vouch
// for that bundle's limits. Everything goes through the API, over HTTP.
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

	// Back to p1 (a tightening: one operator).
	if code, body := a.send("ops-ida", http.MethodPost, "/v1/bundles/"+p1+"/activate", "", nil); code != http.StatusCreated {
		t.Fatalf("rolling back to p1: %d %s", code, body)
	}
	// Under p1 again, a $70.00 refund waits for a lead.
	if code, status := a.step("rep-ana", "W-after", "issue_refund", refundArgs("O-1002", 7000)); code != http.StatusAccepted || status != "waiting_approval" {
		t.Fatalf("$70.00 under p1 after the rollback: %d %s, want 202 waiting_approval", code, status)
	}

	// A break-glass release of p2 lets $120.00 through; back to p1.
	p2 := loadBundle(t, "p2")
	code, body = a.send("ops-ida", http.MethodPost, "/v1/bundles?break_glass=true&reason=incident", "application/gzip", p2.Archive())
	if code != http.StatusAccepted {
		t.Fatalf("break-glass p2: %d %s", code, body)
	}
	if code, body := a.send("ops-jon", http.MethodPost, "/v1/bundles/"+p2.Digest()+"/approve", "", nil); code != http.StatusCreated {
		t.Fatalf("ops-jon approving the break-glass p2: %d %s", code, body)
	}
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
	if len(over) != 1 || over[0].StepRef != ref("W-p2", 1, "O-1001") {
		t.Fatalf("refund_over_limit_without_approval %+v, want W-p2/1 only", over)
	}
	if o := over[0]; o.Limit != 5000 || o.Revision != "p2" || o.Note == "" {
		t.Errorf("the W-p2 finding %+v: want it held to $50.00, naming p2 and why its own limit was not used", o)
	}
	if r.Count(reconcile.Matched) != 2 || r.Unexplained != 1 {
		t.Errorf("matched %d, unexplained %d; want both refunds matched and one finding", r.Count(reconcile.Matched), r.Unexplained)
	}

	alerts, err := st.Monitor.Check(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var alerted []string
	for _, al := range alerts {
		if al.Kind != monitor.KindInvariant {
			continue
		}
		for _, v := range al.Steps {
			alerted = append(alerted, v.Workflow)
			if v.Limit != 5000 || v.Revision != "p2" || v.Note == "" {
				t.Errorf("violation %+v: want it held to $50.00, naming p2 and why", v)
			}
		}
	}
	if len(alerted) != 1 || alerted[0] != "W-p2" {
		t.Errorf("the monitor alerted %v, want W-p2 only", alerted)
	}
}
