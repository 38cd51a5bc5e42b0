package engine_test

import (
	"context"
	"strings"
	"testing"

	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

const reshipO1001 = `{"order":"O-1001"}`

// reshipDone proposes a reship in wf and, should the policy ask a lead
// for it, has lead-dee approve it and resumes; the reship must end done.
func (h *harness) reshipDone(rep, wf string) store.Step {
	h.t.Helper()
	s := h.propose(rep, wf, tool.ReshipOrder, reshipO1001)
	if s.Status == store.StepWaitingApproval {
		if _, err := h.eng.Approve(context.Background(), person("lead-dee"), s.Approval, ""); err != nil {
			h.t.Fatal(err)
		}
		snap, err := h.eng.Resume(context.Background(), person(rep), wf)
		steps := snap.Steps
		if err != nil {
			h.t.Fatal(err)
		}
		s = steps[s.N-1]
	}
	if s.Status != store.StepDone {
		h.t.Fatalf("reship in %s: %s (%s), want done", wf, s.Status, s.Note)
	}
	return s
}

func (h *harness) resume(rep, wf string) (store.Workflow, []store.Step) {
	h.t.Helper()
	snap, err := h.eng.Resume(context.Background(), person(rep), wf)
	w, steps := snap.Workflow, snap.Steps
	if err != nil {
		h.t.Fatal(err)
	}
	return w, steps
}

// TestUnknownReshipResolvedByReference: a reship whose answer was lost is
// done when a shipment carries its reference; one whose request may still
// be in flight stays unknown, never sent again, until every token minted
// for it has expired: then the absence is proof, and it is sent again.
func TestUnknownReshipResolvedByReference(t *testing.T) {
	for _, tc := range []struct {
		name      string
		fault     func(*fakeSystems)
		status    store.StepStatus
		workflow  store.WorkflowStatus
		note      string
		shipments int
	}{
		{"the shipment exists: done", func(f *fakeSystems) { f.loseNext = 1 }, store.StepDone, store.WorkflowDone, "resolved by reference", 1},
		{"no shipment carries the reference: stays unknown while it may land", func(f *fakeSystems) { f.dropNext = 1 }, store.StepUnknown, store.WorkflowNeedsReconciliation, "may still land until", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, engine.DefaultControls())
			h.workflow("rep-ana", "W1")
			tc.fault(h.sys)
			if s := h.propose("rep-ana", "W1", tool.ReshipOrder, reshipO1001); s.Status != store.StepUnknown {
				t.Fatalf("reship: %s, want unknown", s.Status)
			}
			for range 2 {
				w, steps := h.resume("rep-ana", "W1")
				if steps[0].Status != tc.status || w.Status != tc.workflow || !strings.Contains(steps[0].Note, tc.note) {
					t.Fatalf("after resume: step %s (%s), workflow %s; want %s, %s, a note with %q", steps[0].Status, steps[0].Note, w.Status, tc.status, tc.workflow, tc.note)
				}
			}
			if n := h.sys.shipments["O-1001"]; n != tc.shipments {
				t.Fatalf("%d shipments, want %d", n, tc.shipments)
			}
			_, steps := h.resume("rep-ana", "W1")
			if tc.status == store.StepUnknown {
				h.clock.Set(steps[0].ResolveAfter) // the last moment a request of it could land has passed
				_, steps = h.resume("rep-ana", "W1")
			}
			if steps[0].Status != store.StepDone || h.sys.shipments["O-1001"] != 1 {
				t.Fatalf("after its tokens expired: %s (%s), %d shipments; want done, 1", steps[0].Status, steps[0].Note, h.sys.shipments["O-1001"])
			}
		})
	}
}

// TestUnknownReshipIgnoresAnotherWorkflowsShipment: W1's reship is sent
// and not answered (no shipment yet); W2 reships the same order; resuming
// W1 must not take W2's shipment for its own. Counting against the
// baseline (the lookup by reference switched off) does.
func TestUnknownReshipIgnoresAnotherWorkflowsShipment(t *testing.T) {
	for _, tc := range []struct {
		name   string
		noRefs bool
		want   store.StepStatus
	}{
		{"by reference: W1 stays unknown", false, store.StepUnknown},
		{"by count (control removed): W1 takes W2's shipment", true, store.StepDone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := engine.DefaultControls()
			c.ResolveByReference = !tc.noRefs
			h := newHarness(t, c)
			h.workflow("rep-ana", "W1")
			h.workflow("rep-ana", "W2")
			h.sys.dropNext = 1
			if s := h.propose("rep-ana", "W1", tool.ReshipOrder, reshipO1001); s.Status != store.StepUnknown {
				t.Fatalf("W1 reship: %s, want unknown", s.Status)
			}
			h.reshipDone("rep-ana", "W2")
			_, steps := h.resume("rep-ana", "W1")
			if steps[0].Status != tc.want {
				t.Fatalf("W1/1 %s (%s), want %s", steps[0].Status, steps[0].Note, tc.want)
			}
			if n := h.sys.shipments["O-1001"]; n != 1 {
				t.Fatalf("%d shipments, want 1 (W2's)", n)
			}
		})
	}
}
