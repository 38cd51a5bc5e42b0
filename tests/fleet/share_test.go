package fleet_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/bundles"
	"github.com/countersign/countersign/executor/policy"
)

// TestOneStoreAcrossThreeSidecars: three sidecars on one database see one
// truth. The two that join with the production flags become ready with
// the bundle the first activated (restored from the store); a workflow
// created through B is found through C; after A spent O-1001's automatic
// headroom, W-b's refund through B waits for approval, which is approved
// through C and executes once when the agent resumes through A, and
// resuming again through B changes nothing; a bundle activated through B
// and C is the one A decides with next.
func TestOneStoreAcrossThreeSidecars(t *testing.T) {
	f := newFleet(t, 3)
	a, b, c := f.procs[0], f.procs[1], f.procs[2]
	rep, lead, ops := f.tokens["rep-ana"], f.tokens["lead-dee"], f.tokens["ops-ida"]

	var active struct{ Digest string }
	a.call(t, ops, http.MethodGet, "/v1/bundles/active", "", http.StatusOK, &active)
	for _, p := range []*proc{b, c} {
		var got struct{ Digest string }
		p.call(t, ops, http.MethodGet, "/v1/bundles/active", "", http.StatusOK, &got)
		if got.Digest != active.Digest || got.Digest == "" {
			t.Errorf("%s decides with bundle %q, the fleet's active one is %q", p.ep.Sidecar, got.Digest, active.Digest)
		}
	}

	b.call(t, rep, http.MethodPost, "/v1/workflows", `{"id":"W-b","ticket":"T-b"}`, http.StatusCreated, nil)
	c.call(t, rep, http.MethodGet, "/v1/workflows/W-b", "", http.StatusOK, nil)

	a.call(t, rep, http.MethodPost, "/v1/workflows", `{"id":"W-a","ticket":"T-a"}`, http.StatusCreated, nil)
	var s step
	a.call(t, rep, http.MethodPost, "/v1/workflows/W-a/steps", refund49, http.StatusOK, &s)
	if s.Status != "done" {
		t.Fatalf("the first $49 refund: %+v, want done", s)
	}
	b.call(t, rep, http.MethodPost, "/v1/workflows/W-b/steps", refund49, http.StatusAccepted, &s)
	if s.Status != "waiting_approval" || s.Rule != "R7-refund-needs-approval" || s.Approval == nil {
		t.Fatalf("the second $49 refund on O-1001, through B: %+v; want waiting_approval under R7, as A spent the order's automatic headroom", s)
	}
	// A reader waiting on B (?wait=60s) is woken by the approval C
	// commits, long before its wait ends: the client gives up at 30s.
	waited := make(chan error, 1)
	var seen struct{ Steps []step }
	go func() {
		client := &http.Client{Timeout: 30 * time.Second}
		req, _ := http.NewRequest(http.MethodGet, b.ep.Sidecar+"/v1/workflows/W-b?wait=60s", nil)
		req.Header.Set("Authorization", "Bearer "+rep)
		res, err := client.Do(req)
		if err == nil {
			err = json.NewDecoder(res.Body).Decode(&seen)
			res.Body.Close()
		}
		waited <- err
	}()
	b.until(t, "a waiting reader", func() bool { return b.metric("countersign_workflow_waiters") == "1" })
	c.call(t, lead, http.MethodPost, "/v1/approvals/"+s.Approval.ID+"/approve", `{}`, http.StatusOK, nil)
	if err := <-waited; err != nil {
		t.Fatalf("the reader waiting on B: %v", err)
	}
	if len(seen.Steps) != 1 || seen.Steps[0].Approval == nil || seen.Steps[0].Approval.Status != "approved" {
		t.Errorf("the reader waiting on B saw %+v, want the step's approval approved", seen.Steps)
	}

	var wf struct{ Steps []step }
	a.call(t, rep, http.MethodPost, "/v1/workflows/W-b/resume", "", http.StatusOK, &wf)
	if len(wf.Steps) != 1 || wf.Steps[0].Status != "done" {
		t.Fatalf("W-b resumed through A: %+v, want its step done", wf.Steps)
	}
	b.call(t, rep, http.MethodPost, "/v1/workflows/W-b/resume", "", http.StatusOK, &wf)
	if len(wf.Steps) != 1 || wf.Steps[0].Status != "done" {
		t.Fatalf("W-b resumed again through B: %+v, want its step done", wf.Steps)
	}
	if n := len(a.ledgerEntries(t, "O-1001")); n != 2 {
		t.Errorf("%d refund entries on O-1001, want 2 (W-a's, and W-b's approved one executed once)", n)
	}

	// p2 raises the automatic refund limit to $5000: uploaded with break
	// glass through B, approved by a second operator through C, it is
	// the bundle A decides the next $60 refund with (done, not waiting).
	b.upload(t, ops, "p2", "?break_glass=true&reason=fleet", http.StatusAccepted)
	c.call(t, f.tokens["ops-jon"], http.MethodPost, "/v1/bundles/"+digest(t, "p2")+"/approve", "", http.StatusCreated, nil)
	a.call(t, rep, http.MethodPost, "/v1/workflows", `{"id":"W-p2","ticket":"T-p2"}`, http.StatusCreated, nil)
	a.call(t, rep, http.MethodPost, "/v1/workflows/W-p2/steps", `{"tool":"issue_refund","args":{"order":"O-1002","amount":6000}}`,
		http.StatusOK, &s)
	if s.Status != "done" {
		t.Errorf("a $60 refund through A after p2 was activated through B and C: %+v, want done under p2", s)
	}
	var decisions struct{ Decisions []struct{ Revision string } }
	a.call(t, ops, http.MethodGet, "/v1/decisions?workflow=W-p2", "", http.StatusOK, &decisions)
	if len(decisions.Decisions) != 1 || decisions.Decisions[0].Revision != "p2" {
		t.Errorf("W-p2's decisions %+v, want one under p2", decisions.Decisions)
	}

	c.verifyAudit(t, ops)
	for _, wf := range []string{"W-a", "W-b", "W-p2"} {
		b.auditCoversDecisions(t, ops, wf)
	}
}

// upload sends the embedded bundle name to POST /v1/bundles{query}.
func (p *proc) upload(t *testing.T, token, name, query string, want int) {
	t.Helper()
	p.post(t, token, query, archive(t, name), want)
}

// uploadArchive sends a bundle's .tar.gz to POST /v1/bundles.
func (p *proc) uploadArchive(t *testing.T, token string, archive []byte, want int) {
	t.Helper()
	p.post(t, token, "", archive, want)
}

func (p *proc) post(t *testing.T, token, query string, archive []byte, want int) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, p.ep.Sidecar+"/v1/bundles"+query, bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/gzip")
	res, err := p.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != want {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("upload%s: %d %s, want %d", query, res.StatusCode, b, want)
	}
}

// archive is the .tar.gz of an embedded bundle.
func archive(t *testing.T, name string) []byte {
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

// digest is the digest of an embedded bundle's .tar.gz.
func digest(t *testing.T, name string) string {
	sum := sha256.Sum256(archive(t, name))
	return hex.EncodeToString(sum[:])
}

const refund49 = `{"tool":"issue_refund","args":{"order":"O-1001","amount":4900}}`

// TestApprovalAcrossThree: an approval requested through A, approved
// through B, executes once when the agent resumes through C, and not again
// when it resumes through A. C dispatches, with the fleet's shared keys.
func TestApprovalAcrossThree(t *testing.T) {
	f := newFleet(t, 3)
	a, b, c := f.procs[0], f.procs[1], f.procs[2]
	rep, lead := f.tokens["rep-ana"], f.tokens["lead-dee"]
	a.call(t, rep, http.MethodPost, "/v1/workflows", `{"id":"W-x","ticket":"T-x"}`, http.StatusCreated, nil)
	var s step
	a.call(t, rep, http.MethodPost, "/v1/workflows/W-x/steps", `{"tool":"issue_refund","args":{"order":"O-1001","amount":6000}}`,
		http.StatusAccepted, &s)
	if s.Status != "waiting_approval" || s.Approval == nil {
		t.Fatalf("a $60 refund: %+v, want waiting_approval", s)
	}
	b.call(t, lead, http.MethodPost, "/v1/approvals/"+s.Approval.ID+"/approve", `{}`, http.StatusOK, nil)
	var wf struct{ Steps []step }
	c.call(t, rep, http.MethodPost, "/v1/workflows/W-x/resume", "", http.StatusOK, &wf)
	if len(wf.Steps) != 1 || wf.Steps[0].Status != "done" {
		t.Fatalf("W-x resumed through C: %+v, want its step done", wf.Steps)
	}
	a.call(t, rep, http.MethodPost, "/v1/workflows/W-x/resume", "", http.StatusOK, &wf)
	if n := len(a.ledgerEntries(t, "O-1001")); n != 1 {
		t.Errorf("%d refund entries on O-1001, want 1", n)
	}
}

// TestFiftyRefundsSpreadOverThree: 50 concurrent $49 refunds on one order,
// spread over three sidecars, one workflow each: exactly one is done, the
// other 49 wait for approval, and the ledger has one entry. Whichever
// sidecar wins dispatches, with the fleet's shared keys.
func TestFiftyRefundsSpreadOverThree(t *testing.T) {
	f := newFleet(t, 3)
	rep := f.tokens["rep-ana"]
	const n = 50
	statuses := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		p := f.procs[i%len(f.procs)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			wf := fmt.Sprintf("W-50-%d", i)
			if status, err := p.do(rep, http.MethodPost, "/v1/workflows", `{"id":"`+wf+`","ticket":"T-50"}`, nil); status != http.StatusCreated {
				statuses[i] = fmt.Sprintf("create %d %v", status, err)
				return
			}
			var s step
			status, err := p.do(rep, http.MethodPost, "/v1/workflows/"+wf+"/steps",
				refund49, &s)
			statuses[i] = s.Status
			if err != nil {
				statuses[i] = fmt.Sprintf("%d %v", status, err)
			}
		}()
	}
	wg.Wait()
	count := map[string]int{}
	for _, s := range statuses {
		count[s]++
	}
	if count["done"] != 1 || count["waiting_approval"] != n-1 {
		t.Errorf("answers %v, want 1 done and %d waiting_approval", count, n-1)
	}
	if got := len(f.first.ledgerEntries(t, "O-1001")); got != 1 {
		t.Errorf("%d ledger entries on O-1001, want 1", got)
	}
}

// metric is the value of the unlabelled metric name on p's /metrics, or "".
func (p *proc) metric(name string) string {
	res, err := p.client.Get(p.ep.Sidecar + "/metrics")
	if err != nil {
		return ""
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v
		}
	}
	return ""
}
