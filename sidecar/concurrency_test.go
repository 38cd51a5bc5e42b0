package sidecar_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/countersign/countersign/cmd/devstack"
)

const parallel = 50

// concurrently runs f(i) for i in [0, n) at once and returns the answers.
func concurrently(n int, f func(i int) (reply, step)) ([]reply, []step) {
	replies, steps := make([]reply, n), make([]step, n)
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-gate
			replies[i], steps[i] = f(i)
		})
	}
	close(gate)
	wg.Wait()
	return replies, steps
}

// Fifty $49 refunds on one order from fifty workflows: the cumulative basis
// lets exactly one through under the $50 auto limit; the others wait.
func TestConcurrentSplitRefunds(t *testing.T) {
	e := start(t, devstack.Options{})
	for i := range parallel {
		e.open(t, "rep-ana", fmt.Sprintf("W-split-%d", i))
	}
	replies, steps := concurrently(parallel, func(i int) (reply, step) {
		return e.propose(t, "rep-ana", fmt.Sprintf("W-split-%d", i), "issue_refund", refund("O-1002", 4900))
	})
	count := map[string]int{}
	for i, r := range replies {
		s := steps[i]
		switch {
		case r.status == http.StatusOK && s.Status == "done" && s.Rule == "default-allow-after-checks":
		case r.status == http.StatusAccepted && s.Status == "waiting_approval" && s.Rule == "R7-refund-needs-approval":
		default:
			t.Errorf("call %d: status %d body %s", i, r.status, r.body)
		}
		count[s.Status]++
	}
	if count["done"] != 1 || count["waiting_approval"] != parallel-1 {
		t.Errorf("statuses %v, want 1 done and %d waiting_approval", count, parallel-1)
	}
	if got := e.wantLedger(t, 1); got[0].Order != "O-1002" || got[0].Amount != 4900 {
		t.Errorf("ledger entry %+v, want $49 on O-1002", got[0])
	}
}

// Fifty copies of the same call in one workflow: one effect, and every
// other copy is suppressed and names the first.
func TestConcurrentSameStep(t *testing.T) {
	e := start(t, devstack.Options{})
	e.open(t, "rep-ana", "W-dup")
	replies, steps := concurrently(parallel, func(int) (reply, step) {
		return e.propose(t, "rep-ana", "W-dup", "issue_refund", refund("O-1001", 4900))
	})
	count := map[string]int{}
	ns := map[int]bool{}
	for i, r := range replies {
		s := steps[i]
		ns[s.N] = true
		switch {
		case r.status == http.StatusOK && s.Status == "done" && s.N == 1:
		case r.status == http.StatusOK && s.Status == "suppressed" && s.DuplicateOf == 1 && s.N > 1:
		default:
			t.Errorf("call %d: status %d body %s", i, r.status, r.body)
		}
		count[s.Status]++
	}
	if count["done"] != 1 || count["suppressed"] != parallel-1 || len(ns) != parallel {
		t.Errorf("statuses %v over %d distinct step numbers, want 1 done and %d suppressed over %d", count, len(ns), parallel-1, parallel)
	}
	entries := e.wantLedger(t, 1)
	w := e.getWorkflow(t, "rep-ana", "W-dup")
	if len(w.Steps) != parallel || w.Status != "done" {
		t.Errorf("workflow %s with %d steps, want done with %d", w.Status, len(w.Steps), parallel)
	}
	// Resuming does not pay a second time either.
	e.resume(t, "rep-ana", "W-dup")
	if again := e.wantLedger(t, 1); again[0] != entries[0] {
		t.Errorf("ledger entry changed on resume: %+v -> %+v", entries[0], again[0])
	}
}
