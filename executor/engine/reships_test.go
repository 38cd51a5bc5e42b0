package engine_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

// Reships of one order from several workflows: each decision is told how
// many earlier ones happened or may have (done, unknown), not the ones that
// stopped before any effect (held) nor refunds. With the count, the policy
// asks a lead for the second (R10) and denies the third (R11); without the
// control, every reship looks like the first.
func TestDecisionInputCarriesTheOrdersReships(t *testing.T) {
	for _, tc := range []struct {
		name    string
		history bool
		want    []int            // order_reships seen by the proposals of W1, W2, W4
		w2, w4  store.StepStatus // W2 and W4 as proposed
	}{
		{"the count is supplied across workflows", true, []int{0, 1, 2}, store.StepWaitingApproval, store.StepDenied},
		{"reship_history removed, it is always 0", false, []int{0, 0, 0}, store.StepUnknown, store.StepDone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := engine.DefaultControls()
			c.ReshipHistory = tc.history
			h := newHarness(t, c)
			rec := h.record()
			ctx := context.Background()
			var seen []int
			reship := func(wf string, want store.StepStatus, decided bool) store.Step {
				t.Helper()
				h.workflow("rep-ana", wf)
				before := len(rec.inputs)
				s := h.propose("rep-ana", wf, tool.ReshipOrder, `{"order":"O-1001"}`)
				if s.Status != want {
					t.Fatalf("%s: reship %s (%s), want %s", wf, s.Status, s.Note, want)
				}
				if decided {
					seen = append(seen, rec.last().Totals.OrderReships)
				} else if len(rec.inputs) != before {
					t.Fatalf("%s: a held reship reached the policy", wf)
				}
				return s
			}
			reship("W1", store.StepDone, true)
			h.sys.loseNext = 1 // W2 ships, but the answer is lost
			if s := reship("W2", tc.w2, true); s.Status == store.StepWaitingApproval {
				if _, err := h.eng.Approve(ctx, person("lead-dee"), s.Approval, ""); err != nil {
					t.Fatal(err)
				}
				if _, steps := h.resume("rep-ana", "W2"); steps[0].Status != store.StepUnknown {
					t.Fatalf("W2 after approval: %s, want unknown", steps[0].Status)
				}
			}
			if err := h.eng.SetSwitch(ctx, person("ops-ida"), tool.ReshipOrder, false, ""); err != nil {
				t.Fatal(err)
			}
			reship("W3", store.StepHeld, false)
			if err := h.eng.SetSwitch(ctx, person("ops-ida"), tool.ReshipOrder, true, ""); err != nil {
				t.Fatal(err)
			}
			h.propose("rep-ana", "W3", tool.IssueRefund, `{"order":"O-1001","amount":1000}`)
			reship("W4", tc.w4, true)
			if fmt.Sprint(seen) != fmt.Sprint(tc.want) {
				t.Fatalf("order_reships seen by the decisions = %v, want %v", seen, tc.want)
			}
		})
	}
}
