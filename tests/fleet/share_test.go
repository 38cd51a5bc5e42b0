package fleet_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
)

// TestOneStoreAcrossThreeSidecars: three sidecars on one database see one
// truth. The two that join with the production flags become ready with
// the bundle the first activated (restored from the store); a workflow
// created through B is found through C; after A spent O-1001's automatic
// headroom, W-b's refund waits for approval, which is approved through C
// and executes once when the agent resumes through A, and resuming again
// through B changes nothing. Every call to a system of record goes
// through A here (see the package doc); TestApprovalAcrossThree has B and
// C dispatch.
func TestOneStoreAcrossThreeSidecars(t *testing.T) {
	f := newFleet(t, 3, false)
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
	a.call(t, rep, http.MethodPost, "/v1/workflows/W-b/steps", refund49, http.StatusAccepted, &s)
	if s.Status != "waiting_approval" || s.Rule != "R7-refund-needs-approval" || s.Approval == nil {
		t.Fatalf("the second $49 refund on O-1001: %+v; want waiting_approval under R7", s)
	}
	c.call(t, lead, http.MethodPost, "/v1/approvals/"+s.Approval.ID+"/approve", `{}`, http.StatusOK, nil)

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
	var verify struct{ OK bool }
	c.call(t, ops, http.MethodGet, "/v1/audit/verify", "", http.StatusOK, &verify)
	if !verify.OK {
		t.Error("the fleet's audit chain does not verify")
	}
}

const refund49 = `{"tool":"issue_refund","args":{"order":"O-1001","amount":4900}}`

// TestApprovalAcrossThree: an approval requested through A, approved
// through B, executes once when the agent resumes through C, and not again
// when it resumes through A. C dispatches, so it needs the fleet's shared
// keys.
func TestApprovalAcrossThree(t *testing.T) {
	f := newFleet(t, 3, true)
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
// sidecar wins dispatches, so it needs the fleet's shared keys.
func TestFiftyRefundsSpreadOverThree(t *testing.T) {
	f := newFleet(t, 3, true)
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
