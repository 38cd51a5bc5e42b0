package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/tool"
)

// BenchmarkProposeRefund measures one refund step through the engine
// (normalize, rehydrate from an in-memory system of record, decide with OPA
// and reserve in one fsync'd bbolt transaction, dispatch, record) with
// different amounts of history behind it. Flat ns/op across history sizes
// is the property: a decision reads indexes, never all steps.
func BenchmarkProposeRefund(b *testing.B) {
	for _, history := range []int{0, 5000} {
		b.Run(fmt.Sprintf("history=%d", history), func(b *testing.B) {
			h := newHarness(b, engine.DefaultControls())
			ctx := context.Background()
			rep := person("rep-ana")
			// History: small refunds two days ago, outside every window.
			h.clock.Advance(-48 * time.Hour)
			for i := range history {
				wf := fmt.Sprintf("H%d", i)
				h.workflow("rep-ana", wf)
				h.sys.orders[fmt.Sprintf("O-%d", 900000+i)] = h.sys.orders["O-1002"]
				if _, err := h.eng.Propose(ctx, rep, wf, tool.IssueRefund, json.RawMessage(fmt.Sprintf(`{"order":"O-%d","amount":100}`, 900000+i))); err != nil {
					b.Fatal(err)
				}
			}
			h.clock.Advance(48 * time.Hour)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				wf := fmt.Sprintf("B%d", i)
				h.workflow("rep-ana", wf)
				b.StartTimer()
				// One cent each: far under every cap, so every op is a full ALLOW and effect.
				if _, err := h.eng.Propose(ctx, rep, wf, tool.IssueRefund, json.RawMessage(`{"order":"O-1002","amount":1}`)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkApprovalQueue measures a lead's GET /v1/approvals behind n
// pending approvals: one read transaction, then the approver rules (one
// OPA evaluation) per item, so the cost grows with the queue.
func BenchmarkApprovalQueue(b *testing.B) {
	for _, n := range []int{10, 100} {
		b.Run(fmt.Sprintf("pending=%d", n), func(b *testing.B) {
			h := newHarness(b, engine.DefaultControls())
			ctx := context.Background()
			for i := range n {
				wf := fmt.Sprintf("Q%d", i)
				h.workflow("rep-ana", wf)
				order := fmt.Sprintf("O-%d", 800000+i)
				h.sys.orders[order] = h.sys.orders["O-1002"]
				// $120: above the auto limit, so each waits for a lead.
				if s := h.propose("rep-ana", wf, tool.IssueRefund, fmt.Sprintf(`{"order":%q,"amount":12000}`, order)); s.Approval == "" {
					b.Fatalf("step %s, want waiting for approval", s.Status)
				}
			}
			lead := person("lead-dee")
			for _, facts := range []bool{false, true} {
				// With Facts (the page's cards): the decision that asked and
				// the order's refunds, two index reads more per item.
				b.Run(fmt.Sprintf("facts=%t", facts), func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						items, err := h.eng.ApprovalQueue(ctx, lead, engine.ApprovalQuery{Status: "pending", Facts: facts})
						if err != nil || len(items) != n {
							b.Fatalf("%d items, %v; want %d", len(items), err, n)
						}
					}
				})
			}
		})
	}
}
