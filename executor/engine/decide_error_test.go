package engine_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

// errSlowPolicy stands for the policy's own timeout sentinel, which the
// engine must pass through without knowing it.
var errSlowPolicy = errors.New("policy evaluation over its deadline")

// A decision that fails leaves the step as it was: nothing logged, nothing
// dispatched, the error still recognisable, and the step runs on resume.
func TestDecideErrorLeavesTheStepResumable(t *testing.T) {
	h := newHarness(t, engine.DefaultControls())
	rec := h.record()
	ctx := context.Background()
	h.workflow("rep-ana", "W1")
	rec.setFail(fmt.Errorf("evaluate countersign.call: %w", errSlowPolicy))
	_, err := h.eng.Propose(ctx, person("rep-ana"), "W1", tool.IssueRefund, []byte(`{"order":"O-1001","amount":3000}`))
	if !errors.Is(err, errSlowPolicy) {
		t.Fatalf("propose: %v, want an error wrapping the policy's", err)
	}
	_, steps, _ := h.eng.Workflow(ctx, person("rep-ana"), "W1")
	decisions, _ := h.eng.Decisions(ctx, store.DecisionFilter{Workflow: "W1"}, 10)
	if len(steps) != 1 || steps[0].Status != store.StepPending || steps[0].Decision != "" || len(decisions.Decisions) != 0 || h.sys.refunds != 0 {
		t.Fatalf("after a failed decision: steps %+v, %d decisions, %d refunds", steps, len(decisions.Decisions), h.sys.refunds)
	}
	rec.setFail(nil)
	snap, err := h.eng.Resume(ctx, person("rep-ana"), "W1")
	steps = snap.Steps
	if err != nil || steps[0].Status != store.StepDone || h.sys.refunds != 1 {
		t.Fatalf("resume: %v, step %s, %d refunds", err, steps[0].Status, h.sys.refunds)
	}
}
