package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

// sidecar is an engine over the harness's store as one sidecar of a fleet
// runs it: under leases, as holder.
func (h *harness) sidecar(holder string, failpoint func(string) error) *engine.Engine {
	c := h.control
	return engine.New(engine.Options{Store: h.db, Policy: h.pol, Systems: h.sys, Clock: h.clock, Controls: &c,
		Failpoint: failpoint, Leases: &engine.Leases{Holder: holder, TTL: time.Minute}})
}

func (h *harness) lease(wf string) (store.Lease, error) {
	var l store.Lease
	err := h.db.View(func(tx *store.Tx) (err error) { l, err = tx.Lease(wf); return err })
	return l, err
}

func (h *harness) stepStatus(wf string) store.StepStatus {
	h.t.Helper()
	_, steps, err := h.eng.Workflow(context.Background(), person("ops-ida"), wf)
	if err != nil || len(steps) == 0 {
		h.t.Fatalf("workflow %s: %d steps, %v", wf, len(steps), err)
	}
	return steps[0].Status
}

// TestResumeAllLeavesLiveLeasesAlone: a sidecar starting on a shared store
// resumes the open workflows nobody drives (the one whose driver shut down
// and let its lease go), leaves the one a live sidecar holds, and takes
// that one over once its lease has expired.
func TestResumeAllLeavesLiveLeasesAlone(t *testing.T) {
	h := newHarness(t, engine.DefaultControls())
	crash := func(p string) error {
		if p == "before_dispatch" {
			return engine.ErrCrashed
		}
		return nil
	}
	a := h.sidecar("a", crash)
	h.eng = a
	for _, wf := range []string{"W1", "W2"} {
		h.workflow("rep-ana", wf)
		if _, err := a.Propose(context.Background(), person("rep-ana"), wf, tool.IssueRefund, json.RawMessage(`{"order":"O-1001","amount":2000}`)); !errors.Is(err, engine.ErrCrashed) {
			t.Fatalf("%s: no crash: %v", wf, err)
		}
	}
	a.Close()
	for _, wf := range []string{"W1", "W2"} {
		if l, err := h.lease(wf); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("after Close the lease of %s is still there (%+v, %v): a fleet would wait it out", wf, l, err)
		}
	}
	// Sidecar a drives W1 again and is alive: its lease runs for a minute.
	expires := h.clock.Now().Add(time.Minute)
	if err := h.db.Update(func(tx *store.Tx) error {
		return tx.PutLease(store.Lease{Workflow: "W1", Holder: "a", Token: "t", Expires: expires})
	}); err != nil {
		t.Fatal(err)
	}

	b := h.sidecar("b", nil)
	h.eng = b
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second) // were W1 waited for, it would be until then
	defer cancel()
	if err := b.ResumeAll(ctx); err != nil {
		t.Fatal(err)
	}
	if s := h.stepStatus("W2"); s != store.StepDone {
		t.Fatalf("W2, which no sidecar drives, is %s after the start-up resume; want done", s)
	}
	if s := h.stepStatus("W1"); s != store.StepStarted {
		t.Fatalf("W1, driven by live sidecar a, is %s after b's start-up resume; want started, left to a", s)
	}
	if h.sys.refunds != 1 {
		t.Fatalf("%d refunds, want 1 (W2's)", h.sys.refunds)
	}

	h.clock.Advance(time.Minute) // a stopped renewing: it was killed
	if err := b.ResumeAll(ctx); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if s := h.stepStatus("W1"); s != store.StepDone || h.sys.refunds != 2 {
		t.Fatalf("W1 is %s with %d refunds in all once a's lease expired; want done and 2", s, h.sys.refunds)
	}
}
