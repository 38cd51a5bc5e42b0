package engine_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

// A lead's rejection binds the call it rejected: the same call stays
// denied, an amended call is a new one and asks again.
func TestRejectionBindsTheCall(t *testing.T) {
	for _, tc := range []struct {
		name    string
		amendTo string // "" keeps the rejected call
		want    store.StepStatus
	}{
		{"the rejected call itself is denied", "", store.StepDenied},
		{"an amended call gets a new approval request", `{"order":"O-1002","amount":11000}`, store.StepWaitingApproval},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, engine.DefaultControls())
			ctx := context.Background()
			h.workflow("rep-ana", "W1")
			s := h.propose("rep-ana", "W1", tool.IssueRefund, `{"order":"O-1002","amount":12000}`)
			if _, err := h.eng.Reject(ctx, person("lead-dee"), s.Approval, "too much"); err != nil {
				t.Fatal(err)
			}
			if tc.amendTo != "" {
				if _, err := h.eng.Amend(ctx, person("rep-ana"), "W1", 1, json.RawMessage(tc.amendTo)); err != nil {
					t.Fatal(err)
				}
			}
			snap, err := h.eng.Resume(ctx, person("rep-ana"), "W1")
			steps := snap.Steps
			if err != nil || steps[0].Status != tc.want {
				t.Fatalf("resume: %v, step %s (%s), want %s", err, steps[0].Status, steps[0].Note, tc.want)
			}
			old, _ := h.eng.Approval(ctx, s.Approval)
			if old.Status != store.ApprovalRejected {
				t.Errorf("the rejection is now %s", old.Status)
			}
			if tc.want == store.StepWaitingApproval {
				a, _ := h.eng.Approval(ctx, steps[0].Approval)
				if a.ID == s.Approval || a.Status != store.ApprovalPending || a.Args.Amount != 11000 {
					t.Errorf("approval %s %s for %d, want a new pending one for 11000", a.ID, a.Status, a.Args.Amount)
				}
			}
			if h.sys.refunds != 0 {
				t.Errorf("%d refunds", h.sys.refunds)
			}
		})
	}
}
