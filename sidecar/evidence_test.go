package sidecar_test

import (
	"bytes"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/countersign/countersign/cmd/devstack"
	"github.com/countersign/countersign/cmd/stack"
	"github.com/countersign/countersign/executor/audit"
	"github.com/countersign/countersign/sidecar/client"
)

// evidenceOf reads step n of wf's evidence as who, over the sidecar's socket.
func (e *env) evidenceOf(t *testing.T, who, wf string, n int) client.Evidence {
	t.Helper()
	var ev client.Evidence
	e.call(t, http.MethodGet, "/v1/workflows/"+wf+"/steps/"+strconv.Itoa(n)+"/evidence", who, nil).decode(t, &ev)
	return ev
}

// checkRecords holds the evidence's records to the exported chain: each at
// its position, with its hash, in order, and the verdict through the last.
func checkRecords(t *testing.T, e *env, ev client.Evidence, kinds ...string) {
	t.Helper()
	chain := e.ndjson(t, "/v1/audit?format=ndjson", "ops-ida")
	var got []string
	for i, r := range ev.Records {
		if r.Position >= len(chain) || chain[r.Position].fields["hash"] != r.Hash || chain[r.Position].fields["id"] != r.ID {
			t.Errorf("record %s at position %d is not the chain's record there", r.ID, r.Position)
		}
		if i > 0 && r.Position <= ev.Records[i-1].Position {
			t.Errorf("positions out of order: %d after %d", r.Position, ev.Records[i-1].Position)
		}
		got = append(got, r.Kind)
	}
	if !containsInOrder(got, kinds) {
		t.Errorf("records of kinds %v, want %v among them in that order", got, kinds)
	}
	v := ev.Verification
	if !v.OK || v.Through == nil || *v.Through != ev.Records[len(ev.Records)-1].Position || v.Records != len(chain) || v.Broken != nil || v.Text == "" {
		t.Errorf("verification %+v, want ok through the last record, the chain of %d records intact", v, len(chain))
	}
}

func containsInOrder(got, want []string) bool {
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	return i == len(want)
}

// One answer for a refund that waited for a lead, was approved with a
// comment and paid: who asked, the policy, the approval, the effect, and
// the audit records that prove them, read by the rep over the socket.
func TestEvidenceOfAnApprovedRefund(t *testing.T) {
	e := start(t, devstack.Options{})
	e.open(t, "rep-ana", "W1")
	r, s := e.propose(t, "rep-ana", "W1", "issue_refund", refund("O-1002", 12000))
	r.want(t, http.StatusAccepted, "")
	e.call(t, http.MethodPost, "/v1/approvals/"+s.Approval.ID+"/approve", "lead-dee", map[string]string{"comment": "customer sent photos"}).want(t, http.StatusOK, "")
	if w := e.resume(t, "rep-ana", "W1"); w.Steps[0].Status != "done" {
		t.Fatalf("after the approval: %s", w.Steps[0].Status)
	}
	paid := e.wantLedger(t, 1)[0]
	var active struct {
		Revision, Digest string
	}
	e.call(t, http.MethodGet, "/v1/bundles/active", "ops-ida", nil).decode(t, &active)

	ev := e.evidenceOf(t, "rep-ana", "W1", 1)
	if a := ev.Asked; a.Rep != "rep-ana" || a.Ticket != "T-W1" || a.Agent == "" || a.Opened.IsZero() {
		t.Errorf("asked %+v, want rep-ana on T-W1 and the agent the ledger verified", a)
	}
	if c := ev.Call; c.Tool != "issue_refund" || c.Args.Order != "O-1002" || *c.Args.Amount != 12000 || c.Status != "done" || c.CallHash == "" {
		t.Errorf("call %+v", c)
	}
	p := ev.Policy
	if p == nil || p.Decision != "REQUIRE_APPROVAL" || p.Rule != "R7-refund-needs-approval" || p.Revision != active.Revision ||
		p.Digest != active.Digest || p.DecisionID == "" || !bytes.Contains(p.Input, []byte(`"amount":12000`)) {
		t.Fatalf("policy %+v, want R7 under the active bundle %s with its input", p, active.Digest)
	}
	a := ev.Approval
	if a == nil || a.Approver != "lead-dee" || a.Requester != "rep-ana" || a.Comment != "customer sent photos" ||
		a.CallHash != ev.Call.CallHash || a.Decided == nil || a.Status != "used" {
		t.Errorf("approval %+v, want lead-dee's, used, bound to the call's hash %s", a, ev.Call.CallHash)
	}
	if f := ev.Effect; f == nil || f.Entry != paid.ID || f.Amount != 12000 {
		t.Errorf("effect %+v, want the ledger's entry %s of $120.00", f, paid.ID)
	}
	checkRecords(t, e, ev, "decision", "approval", "dispatch", "result")

	// A lead and an operator read it too; another rep is told it does not
	// exist, as for an unknown workflow or step.
	for _, who := range []string{"lead-eli", "ops-ida"} {
		if got := e.evidenceOf(t, who, "W1", 1); got.Policy == nil || got.Policy.DecisionID != p.DecisionID {
			t.Errorf("%s read %+v", who, got.Policy)
		}
	}
	e.call(t, http.MethodGet, "/v1/workflows/W1/steps/1/evidence", "rep-ben", nil).want(t, http.StatusNotFound, "not_found")
	e.call(t, http.MethodGet, "/v1/workflows/W9/steps/1/evidence", "rep-ana", nil).want(t, http.StatusNotFound, "not_found")
	e.call(t, http.MethodGet, "/v1/workflows/W1/steps/2/evidence", "rep-ana", nil).want(t, http.StatusNotFound, "not_found")
	e.call(t, http.MethodGet, "/v1/workflows/W1/steps/x/evidence", "rep-ana", nil).want(t, http.StatusNotFound, "not_found")
	e.call(t, http.MethodGet, "/v1/workflows/W1/steps/1/evidence", "", nil).want(t, http.StatusUnauthorized, "")
}

// A denied refund: the policy and its rule, no approval, no effect, and
// the records of the decision and its end.
// On a fleet the same, once the sequencer has chained the records: before,
// the verdict counts them as pending.
func TestEvidenceOfADeniedRefund(t *testing.T) {
	backends(t, testEvidenceOfADeniedRefund)
}

func testEvidenceOfADeniedRefund(t *testing.T, o devstack.Options) {
	e := start(t, o)
	e.open(t, "rep-ana", "W2")
	r, _ := e.propose(t, "rep-ana", "W2", "issue_refund", refund("O-1001", 15000))
	r.want(t, http.StatusForbidden, "")
	if v := e.evidenceOf(t, "rep-ana", "W2", 1).Verification; !v.OK && v.Pending == 0 {
		t.Errorf("before sequencing: %+v; want proven, or its records counted pending", v)
	}
	e.sequenced(t)
	ev := e.evidenceOf(t, "rep-ana", "W2", 1)
	if p := ev.Policy; p == nil || p.Decision != "DENY" || p.Rule == "" || p.Digest == "" || len(p.Input) == 0 || p.Decisions != 1 {
		t.Fatalf("policy %+v, want the one DENY with its rule, digest and input", p)
	}
	if ev.Approval != nil || ev.Effect != nil || ev.Call.Status != "denied" || ev.Asked.Agent != "" {
		t.Errorf("approval %+v, effect %+v, status %s, agent %q: want none, none, denied, none", ev.Approval, ev.Effect, ev.Call.Status, ev.Asked.Agent)
	}
	checkRecords(t, e, ev, "decision")
	e.wantLedger(t, 0)
}

// A record of the step edited in the store file, as someone with the
// file could, and the verdict says the step is not proven.
func TestEvidenceOfAnEditedRecordIsNotProven(t *testing.T) {
	dir := t.TempDir()
	e := start(t, devstack.Options{DataDir: dir})
	e.open(t, "rep-ana", "W1")
	e.propose(t, "rep-ana", "W1", "issue_refund", refund("O-1001", 3000))
	ev := e.evidenceOf(t, "rep-ana", "W1", 1)
	if !ev.Verification.OK {
		t.Fatalf("before the edit: %+v", ev.Verification)
	}
	if err := e.st.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(filepath.Join(dir, stack.StoreFile), 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	target := ev.Records[0].ID
	err = db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("audit"))
		return b.Put([]byte(target), bytes.Replace(b.Get([]byte(target)), []byte(`"actor":"rep-ana"`), []byte(`"actor":"rep-ben"`), 1))
	})
	if cerr := db.Close(); err != nil || cerr != nil {
		t.Fatal(err, cerr)
	}
	e = start(t, devstack.Options{DataDir: dir})
	v := e.evidenceOf(t, "rep-ana", "W1", 1).Verification
	if v.OK || v.Broken == nil || v.Broken.ID != target {
		t.Errorf("after editing record %s: %+v, want not proven, broken there", target, v)
	}
}

// The evidence names the signed checkpoint that covers the step's records,
// once one does, and says the chain matches it.
func TestEvidenceNamesTheCheckpointThatCoversIt(t *testing.T) {
	e := start(t, devstack.Options{AuditCheckpoint: audit.CheckpointRule{Every: 1}})
	e.open(t, "rep-ana", "W3")
	r, _ := e.propose(t, "rep-ana", "W3", "issue_refund", refund("O-1001", 15000))
	r.want(t, http.StatusForbidden, "")
	var ev client.Evidence
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) { // a guard, not a wait asserted
		if ev = e.evidenceOf(t, "rep-ana", "W3", 1); ev.Verification.Anchored || time.Now().After(deadline) {
			break
		}
	}
	v := ev.Verification
	if !v.OK || !v.Anchored || v.Checkpoint == nil || v.Through == nil || v.Checkpoint.Position <= uint64(*v.Through) ||
		v.Checkpoint.Kid == "" || !strings.Contains(v.Text, "signed checkpoint") {
		t.Fatalf("verification %+v (checkpoint %+v), want one anchored past the step's last record", v, v.Checkpoint)
	}
	var cps client.AuditCheckpoints
	e.call(t, http.MethodGet, "/v1/audit/checkpoints", "ops-ida", nil).decode(t, &cps)
	found := false
	for _, cp := range cps.Checkpoints {
		found = found || cp == *v.Checkpoint
	}
	if !found {
		t.Errorf("the evidence's checkpoint %+v is not one GET /v1/audit/checkpoints lists", *v.Checkpoint)
	}
}
