package fleet_test

import (
	"context"
	"errors"
	"net/http"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/countersign/countersign/executor/store"
)

// TestDeadSidecarsWorkflowTakenOver: a sidecar killed (SIGKILL, at its
// after_dispatch failpoint: the refund paid, not yet recorded) leaves its
// workflow's lease in the store; once the lease expires, the sidecar
// started in its place takes the workflow over through its sweeper (no
// request asks for it) and resolves the started step by the ledger's
// lookup: done, paid once. A resume sent while another holder's lease is
// live waits for it and then answers, rather than failing.
//
// The replacement runs over the same data directory (the simulators live
// there) but is a new holder; TestKillOneOfThreeUnderLoad has the other
// sidecars of a fleet take over.
func TestDeadSidecarsWorkflowTakenOver(t *testing.T) {
	f := prepareFleet(t)
	dir := t.TempDir()
	a1 := f.startFirst(t, dir, []string{"COUNTERSIGN_FAILPOINT=after_dispatch"})
	rep, lead := f.tokens["rep-ana"], f.tokens["lead-dee"]
	a1.call(t, rep, http.MethodPost, "/v1/workflows", `{"id":"W-k","ticket":"T-k"}`, http.StatusCreated, nil)
	if status, err := a1.do(rep, http.MethodPost, "/v1/workflows/W-k/steps", refund49, nil); err == nil {
		t.Fatalf("the refund answered %d: the process was to die at after_dispatch", status)
	}
	a1.wantKilled(t)

	db, err := store.OpenPostgres(context.Background(), f.store, store.PostgresOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.View(func(tx *store.Tx) error {
		if l, err := tx.Lease("W-k"); err != nil || l.Holder == "" {
			t.Errorf("the killed sidecar left no lease on W-k: %+v %v", l, err)
		}
		return nil
	})

	a2 := f.startFirst(t, dir, nil)
	a2.until(t, "W-k taken over", func() bool {
		var wf struct{ Steps []step }
		status, _ := a2.do(rep, http.MethodGet, "/v1/workflows/W-k?wait=10s", "", &wf)
		return status == http.StatusOK && len(wf.Steps) == 1 && wf.Steps[0].Status == "done"
	})
	if n := len(a2.ledgerEntries(t, "O-1001")); n != 1 {
		t.Errorf("%d refund entries on O-1001, want 1: the step the killed sidecar dispatched is paid once", n)
	}

	// A lease held by another sidecar is waited for.
	a2.call(t, rep, http.MethodPost, "/v1/workflows", `{"id":"W-wait","ticket":"T-wait"}`, http.StatusCreated, nil)
	var s step
	a2.call(t, rep, http.MethodPost, "/v1/workflows/W-wait/steps", `{"tool":"issue_refund","args":{"order":"O-1002","amount":6000}}`,
		http.StatusAccepted, &s)
	if s.Approval == nil {
		t.Fatalf("W-wait: %+v, want waiting for approval", s)
	}
	a2.call(t, lead, http.MethodPost, "/v1/approvals/"+s.Approval.ID+"/approve", `{}`, http.StatusOK, nil)
	if err := db.Update(func(tx *store.Tx) error {
		return tx.PutLease(store.Lease{Workflow: "W-wait", Holder: "another-sidecar", Token: "t", Expires: time.Now().Add(3 * leaseTTL)})
	}); err != nil {
		t.Fatal(err)
	}
	var wf struct{ Steps []step }
	a2.call(t, rep, http.MethodPost, "/v1/workflows/W-wait/resume", "", http.StatusOK, &wf)
	if len(wf.Steps) != 1 || wf.Steps[0].Status != "done" {
		t.Errorf("W-wait resumed while another sidecar's lease was live: %+v, want its step done once the lease expired", wf.Steps)
	}
	if n := len(a2.ledgerEntries(t, "O-1002")); n != 1 {
		t.Errorf("%d refund entries on O-1002, want 1", n)
	}

	a2.verifyAudit(t, f.tokens["ops-ida"])
	a2.until(t, "the leases released", func() bool {
		var left []store.Lease
		db.View(func(tx *store.Tx) (err error) { left, err = tx.ExpiredLeases(time.Now().Add(time.Hour)); return err })
		return len(left) == 0
	})
}

// wantKilled waits for the process and checks that SIGKILL ended it.
func (p *proc) wantKilled(t *testing.T) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(readyDeadline):
		t.Fatalf("process %d still running", p.cmd.Process.Pid)
	}
	var ee *exec.ExitError
	if !errors.As(p.err, &ee) {
		t.Fatalf("process ended with %v, want death by SIGKILL", p.err)
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("process ended with %v, want death by SIGKILL", ee)
	}
}

// A member of the fleet killed with a step dispatched and unrecorded leaves
// its lease to expire; a surviving member's sweeper, with no one calling
// resume, takes the workflow over and settles the step by its idempotency
// key: paid once.
func TestSurvivorTakesOverAKilledMember(t *testing.T) {
	f := prepareFleet(t)
	a := f.startFirst(t, t.TempDir(), nil)
	b := f.join(t, "COUNTERSIGN_FAILPOINT=after_dispatch")
	rep := f.tokens["rep-ana"]
	b.call(t, rep, http.MethodPost, "/v1/workflows", `{"id":"W-b","ticket":"T-b"}`, http.StatusCreated, nil)
	if status, err := b.do(rep, http.MethodPost, "/v1/workflows/W-b/steps", refund49, nil); err == nil {
		t.Fatalf("the refund answered %d: sidecar B was to die at after_dispatch", status)
	}
	b.wantKilled(t)

	a.until(t, "W-b taken over by the survivor", func() bool {
		var wf struct{ Steps []step }
		status, _ := a.do(rep, http.MethodGet, "/v1/workflows/W-b?wait=10s", "", &wf)
		return status == http.StatusOK && len(wf.Steps) == 1 && wf.Steps[0].Status == "done"
	})
	if n := len(a.ledgerEntries(t, "O-1001")); n != 1 {
		t.Errorf("%d refund entries on O-1001, want 1: the step B dispatched is paid once", n)
	}
	a.verifyAudit(t, f.tokens["ops-ida"])
}
