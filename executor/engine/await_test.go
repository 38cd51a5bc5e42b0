package engine_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

// awaited is what one Await returned.
type awaited struct {
	snap    engine.Snapshot
	changed bool
	err     error
}

// await starts n readers awaiting wf as who for at most wait, and returns
// once all of them are waiting; their answers come on the channel.
func (h *harness) await(who, wf string, n int, wait time.Duration) <-chan awaited {
	h.t.Helper()
	before := h.eng.Waiting()
	out := make(chan awaited, n)
	for range n {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			snap, changed, err := h.eng.Await(ctx, person(who), wf)
			out <- awaited{snap, changed, err}
		}()
	}
	for h.eng.Waiting() < before+n {
		time.Sleep(time.Millisecond) // polling a condition, not waiting a fixed time
	}
	return out
}

// Each way a workflow's steps or approvals change wakes a reader awaiting
// it, which answers the workflow as the change left it. The readers wait
// for up to a minute: one that was not woken would answer unchanged.
func TestAwaitWakesOnEveryChange(t *testing.T) {
	const refund400 = `{"order":"O-1004","amount":40000}`
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		setup func(h *harness) // leaves W1 as the reader first sees it
		act   func(h *harness) error
		want  func(engine.Snapshot) bool
	}{
		{"a lead approves the step's approval",
			func(h *harness) { h.propose("rep-ben", "W1", tool.IssueRefund, refund400) },
			func(h *harness) error { _, err := h.eng.Approve(ctx, person("lead-eli"), "AP-1", ""); return err },
			func(s engine.Snapshot) bool { return s.Approvals["AP-1"].Status == store.ApprovalApproved }},
		{"a lead rejects the step's approval",
			func(h *harness) { h.propose("rep-ben", "W1", tool.IssueRefund, refund400) },
			func(h *harness) error { _, err := h.eng.Reject(ctx, person("lead-eli"), "AP-1", "no"); return err },
			func(s engine.Snapshot) bool { return s.Approvals["AP-1"].Status == store.ApprovalRejected }},
		{"resume runs the approved step",
			func(h *harness) {
				h.propose("rep-ben", "W1", tool.IssueRefund, refund400)
				if _, err := h.eng.Approve(ctx, person("lead-eli"), "AP-1", ""); err != nil {
					h.t.Fatal(err)
				}
			},
			func(h *harness) error { _, err := h.eng.Resume(ctx, person("rep-ben"), "W1"); return err },
			func(s engine.Snapshot) bool { return s.Steps[0].Status != store.StepWaitingApproval }},
		{"the agent proposes a refund that waits for a lead",
			func(h *harness) {},
			func(h *harness) error {
				_, err := h.eng.Propose(ctx, person("rep-ben"), "W1", tool.IssueRefund, []byte(refund400))
				return err
			},
			func(s engine.Snapshot) bool {
				return len(s.Steps) == 1 && s.Steps[0].Status == store.StepWaitingApproval
			}},
		{"resume after the approval expired requests another",
			func(h *harness) {
				h.propose("rep-ben", "W1", tool.IssueRefund, refund400)
				h.clock.Advance(time.Hour)
			},
			func(h *harness) error { _, err := h.eng.Resume(ctx, person("rep-ben"), "W1"); return err },
			func(s engine.Snapshot) bool {
				return s.Steps[0].Approval == "AP-2" && s.Approvals["AP-2"].Status == store.ApprovalPending
			}},
		{"the agent proposes a step",
			func(h *harness) {},
			func(h *harness) error {
				_, err := h.eng.Propose(ctx, person("rep-ben"), "W1", tool.LookupOrder, []byte(`{"order":"O-1004"}`))
				return err
			},
			func(s engine.Snapshot) bool { return len(s.Steps) == 1 }},
		{"the agent amends a step that waits for a lead",
			func(h *harness) { h.propose("rep-ben", "W1", tool.IssueRefund, refund400) },
			func(h *harness) error {
				_, err := h.eng.Amend(ctx, person("rep-ben"), "W1", 1, []byte(`{"order":"O-1004","amount":39000}`))
				return err
			},
			func(s engine.Snapshot) bool {
				a := s.Approvals["AP-2"]
				return s.Steps[0].Approval == "AP-2" && a.Status == store.ApprovalPending && a.Replaces == "AP-1"
			}},
		{"the agent amends a step into a call the workflow has",
			func(h *harness) {
				h.propose("rep-ben", "W1", tool.IssueRefund, `{"order":"O-1003","amount":1000}`)
				h.propose("rep-ben", "W1", tool.IssueRefund, refund400)
			},
			func(h *harness) error {
				_, err := h.eng.Amend(ctx, person("rep-ben"), "W1", 2, []byte(`{"order":"O-1003","amount":1000}`))
				return err
			},
			func(s engine.Snapshot) bool { return s.Steps[1].Status == store.StepSuppressed }},
		{"a lead ratifies a refund after the fact",
			func(h *harness) { h.propose("rep-ben", "W1", tool.IssueRefund, `{"order":"O-1003","amount":1000}`) },
			func(h *harness) error { _, err := h.eng.Ratify(ctx, person("lead-eli"), "W1", 1, ""); return err },
			func(s engine.Snapshot) bool { return s.Steps[0].Approval != "" }},
		{"a lead reverses a refund",
			func(h *harness) { h.propose("rep-ben", "W1", tool.IssueRefund, `{"order":"O-1003","amount":1000}`) },
			func(h *harness) error { _, err := h.eng.Reverse(ctx, person("lead-eli"), "W1", 1, ""); return err },
			func(s engine.Snapshot) bool { return s.Steps[0].Status == store.StepCompensated }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, engine.DefaultControls())
			h.workflow("rep-ben", "W1")
			tc.setup(h)
			readers := h.await("rep-ben", "W1", 3, time.Minute)
			if err := tc.act(h); err != nil {
				t.Fatal(err)
			}
			for range 3 {
				a := <-readers
				if a.err != nil || !a.changed || !tc.want(a.snap) {
					t.Errorf("awaited: changed %v, err %v, steps %+v, approvals %+v", a.changed, a.err, a.snap.Steps, a.snap.Approvals)
				}
			}
			if n := h.eng.Waiting(); n != 0 {
				t.Errorf("%d readers still registered after all answered", n)
			}
		})
	}
}

// A reader that comes while a step is being dispatched, after its
// reservation, is woken by the outcome's record, whether it is recorded
// at once (an unknown outcome) or rides the next commit (done).
func TestAwaitWakesOnTheOutcomeOfADispatch(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault func(*fakeSystems)
		want  store.StepStatus
	}{
		{"done", func(*fakeSystems) {}, store.StepDone},
		{"outcome unknown", func(f *fakeSystems) { f.dropNext = 1 }, store.StepUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, engine.DefaultControls())
			reached, proceed := make(chan struct{}), make(chan struct{})
			var once sync.Once
			h.eng = engine.New(engine.Options{Store: h.db, Policy: h.pol, Systems: h.sys, Clock: h.clock,
				Failpoint: func(point string) error {
					if point == "before_dispatch" {
						once.Do(func() { close(reached); <-proceed })
					}
					return nil
				}})
			h.workflow("rep-ben", "W1")
			tc.fault(h.sys)
			proposed := make(chan error, 1)
			go func() {
				_, err := h.eng.Propose(context.Background(), person("rep-ben"), "W1", tool.LookupOrder, []byte(`{"order":"O-1004"}`))
				proposed <- err
			}()
			<-reached
			readers := h.await("rep-ben", "W1", 1, time.Minute)
			close(proceed)
			if err := <-proposed; err != nil {
				t.Fatal(err)
			}
			if a := <-readers; a.err != nil || !a.changed || a.snap.Steps[0].Status != tc.want {
				t.Errorf("awaited: changed %v, err %v, steps %+v", a.changed, a.err, a.snap.Steps)
			}
		})
	}
}

// Past the workflow's deadline, the resume that ends its open steps wakes
// the reader.
func TestAwaitWakesWhenTheDeadlineEndsSteps(t *testing.T) {
	h := newHarness(t, engine.DefaultControls())
	ctx := context.Background()
	deadline := h.clock.Now().Add(time.Hour)
	if _, _, err := h.eng.OpenWorkflow(ctx, person("rep-ben"),
		engine.NewWorkflow{ID: "D", Ticket: "T-D", Bounds: engine.Bounds{Deadline: &deadline}}); err != nil {
		t.Fatal(err)
	}
	h.propose("rep-ben", "D", tool.IssueRefund, `{"order":"O-1004","amount":40000}`)
	readers := h.await("rep-ben", "D", 1, time.Minute)
	h.clock.Advance(2 * time.Hour)
	if _, err := h.eng.Resume(ctx, person("rep-ben"), "D"); err != nil {
		t.Fatal(err)
	}
	if a := <-readers; a.err != nil || !a.changed || a.snap.Steps[0].Status != store.StepDenied {
		t.Errorf("awaited: changed %v, err %v, steps %+v", a.changed, a.err, a.snap.Steps)
	}
}

// A step held because the workflow's delegation expired wakes the reader.
func TestAwaitWakesWhenAStepIsHeld(t *testing.T) {
	h := newHarness(t, engine.DefaultControls())
	ctx := context.Background()
	ben := person("rep-ben")
	ben.Expires = h.clock.Now().Add(time.Hour)
	if _, _, err := h.eng.CreateWorkflow(ctx, ben, "W1", "T-1"); err != nil {
		t.Fatal(err)
	}
	h.sys.failNext = 1 // the step stays pending, for resume to retry
	if s, err := h.eng.Propose(ctx, ben, "W1", tool.LookupOrder, []byte(`{"order":"O-1004"}`)); !errors.Is(err, engine.ErrUnavailable) || s.Status != store.StepPending {
		t.Fatalf("propose with the order system down: %s %v", s.Status, err)
	}
	readers := h.await("rep-ben", "W1", 1, time.Minute)
	h.clock.Advance(2 * time.Hour)
	if _, err := h.eng.Resume(ctx, person("ops-ida"), "W1"); err != nil {
		t.Fatal(err)
	}
	if a := <-readers; a.err != nil || !a.changed || a.snap.Steps[0].Status != store.StepHeld {
		t.Errorf("awaited: changed %v, err %v, steps %+v", a.changed, a.err, a.snap.Steps)
	}
}

// What changes no status does not end the wait: another workflow's
// change, a resume that finds nothing to do. The reader answers when its
// wait ends, unchanged.
func TestAwaitWaitsOnThroughWhatChangesNoStatus(t *testing.T) {
	h := newHarness(t, engine.DefaultControls())
	ctx := context.Background()
	h.workflow("rep-ben", "W1")
	h.workflow("rep-ben", "W2")
	h.propose("rep-ben", "W1", tool.IssueRefund, `{"order":"O-1004","amount":40000}`)
	readers := h.await("rep-ben", "W1", 1, time.Second)
	h.propose("rep-ben", "W2", tool.LookupOrder, `{"order":"O-1004"}`)
	if _, err := h.eng.Resume(ctx, person("rep-ben"), "W1"); err != nil {
		t.Fatal(err)
	}
	a := <-readers
	if a.err != nil || a.changed {
		t.Fatalf("awaited: changed %v, err %v", a.changed, a.err)
	}
	if s := a.snap.Steps[0]; s.Status != store.StepWaitingApproval || s.Args.Amount != 40000 {
		t.Errorf("the answer at the end of the wait is not the workflow as it stands: %+v", s)
	}
}

// A reader is refused what Snapshot refuses, at once, and holds nothing.
func TestAwaitRefusesWhatSnapshotRefuses(t *testing.T) {
	h := newHarness(t, engine.DefaultControls())
	h.workflow("rep-ben", "W1")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tc := range []struct {
		who, wf string
		want    error
	}{
		{"rep-ana", "W1", engine.ErrNotFound}, // another rep's is as absent as an unknown id
		{"rep-ben", "W-none", engine.ErrNotFound},
	} {
		if _, _, err := h.eng.Await(ctx, person(tc.who), tc.wf); !errors.Is(err, tc.want) {
			t.Errorf("%s awaiting %s: %v, want %v", tc.who, tc.wf, err, tc.want)
		}
	}
	if n := h.eng.Waiting(); n != 0 {
		t.Errorf("%d readers still registered", n)
	}
}

// Many readers of many workflows at once, woken by changes made
// concurrently: each answers its own workflow's change, and none is left
// registered. Run with -race.
func TestAwaitManyReadersAtOnce(t *testing.T) {
	h := newHarness(t, engine.DefaultControls())
	ctx := context.Background()
	const workflows, perWorkflow = 8, 16
	ids := make([]string, workflows)
	for i := range ids {
		ids[i] = string(rune('A'+i)) + "-wf"
		h.workflow("rep-ben", ids[i])
	}
	readers := make([]<-chan awaited, workflows)
	for i, id := range ids {
		readers[i] = h.await("rep-ben", id, perWorkflow, time.Minute)
	}
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() {
			if _, err := h.eng.Propose(ctx, person("rep-ben"), id, tool.LookupOrder, []byte(`{"order":"O-1004"}`)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for i, id := range ids {
		for range perWorkflow {
			a := <-readers[i]
			if a.err != nil || !a.changed || a.snap.Workflow.ID != id || len(a.snap.Steps) != 1 {
				t.Errorf("reader of %s: changed %v, err %v, workflow %s with %d steps", id, a.changed, a.err, a.snap.Workflow.ID, len(a.snap.Steps))
			}
		}
	}
	if n := h.eng.Waiting(); n != 0 {
		t.Errorf("%d readers still registered after all answered", n)
	}
}

// A reader that says what it last saw (AwaitUntil) is answered at once
// when the workflow moved on before it began, where Await, which has seen
// nothing, waits for a change after it begins; and when the workflow is
// as the reader saw it, AwaitUntil waits for the next change.
func TestAwaitUntilAnswersAtOnceForAChangeBeforeIt(t *testing.T) {
	h := newHarness(t, engine.DefaultControls())
	ctx := context.Background()
	h.workflow("rep-ben", "W1")
	h.propose("rep-ben", "W1", tool.IssueRefund, `{"order":"O-1004","amount":40000}`)
	seen, err := h.eng.Snapshot(ctx, person("rep-ben"), "W1")
	if err != nil {
		t.Fatal(err)
	}
	unseen := func(s engine.Snapshot) bool { return s.Approvals["AP-1"].Status != seen.Approvals["AP-1"].Status }
	if _, err := h.eng.Approve(ctx, person("lead-eli"), "AP-1", ""); err != nil {
		t.Fatal(err)
	}

	// A reader not answered at once waits out the 10 s and answers false.
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	snap, done, err := h.eng.AwaitUntil(wctx, person("rep-ben"), "W1", unseen)
	if err != nil || !done || snap.Approvals["AP-1"].Status != store.ApprovalApproved {
		t.Errorf("AwaitUntil after the approval: done %v, err %v, approvals %+v; want at once, approved", done, err, snap.Approvals)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, changed, err := h.eng.Await(short, person("rep-ben"), "W1"); err != nil || changed {
		t.Errorf("Await after the approval: changed %v, err %v; want it to wait for a change after it began", changed, err)
	}

	seen = snap
	readers := make(chan awaited, 1)
	go func() {
		snap, done, err := h.eng.AwaitUntil(wctx, person("rep-ben"), "W1", func(s engine.Snapshot) bool { return len(s.Steps) != len(seen.Steps) })
		readers <- awaited{snap, done, err}
	}()
	for h.eng.Waiting() == 0 {
		time.Sleep(time.Millisecond) // polling a condition, not waiting a fixed time
	}
	h.propose("rep-ben", "W1", tool.LookupOrder, `{"order":"O-1004"}`)
	if a := <-readers; a.err != nil || !a.changed || len(a.snap.Steps) != 2 {
		t.Errorf("AwaitUntil for a second step: done %v, err %v, %d steps", a.changed, a.err, len(a.snap.Steps))
	}
}
