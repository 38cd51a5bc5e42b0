package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"testing"
	"time"

	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

// BenchmarkHistory measures decision-and-reserve (engine.Propose of a
// one-cent refund in a fresh workflow, under policy p1, with the store's
// normal durability) behind 1k and 1M stored steps. The history is written
// straight into the store in large NoSync transactions, as the engine would
// have left it, so filling 1M steps takes seconds rather than the hours the
// propose path would. The property: p50 at 1M within 1.2x of p50 at 1k.
// Run it with
//
//	go test -run - -bench History -benchtime 2000x ./executor/engine/
//
// -short skips the 1M size.
func BenchmarkHistory(b *testing.B) {
	sizes := []struct {
		name  string
		steps int
	}{{"1k", 1_000}, {"1M", 1_000_000}}
	for _, size := range sizes {
		// Filled once per size and shared by the runs of its sub-benchmark
		// (the testing package calls it with b.N=1 first); the parent's
		// temporary directory outlives them all.
		var dir string
		parent := b
		b.Run("history="+size.name, func(b *testing.B) {
			if testing.Short() && size.steps > 10_000 {
				b.Skip("-short: the 1M-step history takes a while to write")
			}
			if dir == "" {
				dir = parent.TempDir()
				fillHistory(b, filepath.Join(dir, "state.db"), size.steps)
			}
			benchDecideAndReserve(b, dir)
		})
	}
}

// benchStart is when the harness clock starts (newHarness): the history
// ends here and the measured proposals happen here.
var benchStart = time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)

// The shape of the history: workflows of four steps (two refunds that
// happened, a reship that happened, a refund the policy denied) over many
// orders and reps, evenly spread over the day before benchStart. Amounts
// are a few cents so that the rep's day and the agent's hour, which the
// history fills, keep the headroom for the measured one-cent refunds to be
// allowed: each op is then the full path, decision, reserve, effect, record.
const (
	stepsPerWorkflow = 4
	historyReps      = 200 // synthetic reps, besides rep-ana and rep-ben
	historyOrders    = 100_000
	workflowsPerTx   = 20_000
)

// fillHistory writes steps steps of history into a new store at path.
func fillHistory(b *testing.B, path string, steps int) {
	start := time.Now()
	// The fill makes garbage fast: collect it less often.
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	db, err := store.Open(path, store.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	workflows := steps / stepsPerWorkflow
	step := 24 * time.Hour / time.Duration(steps)
	for first := 0; first < workflows; first += workflowsPerTx {
		err := db.Update(func(tx *store.Tx) error {
			for i := first; i < min(first+workflowsPerTx, workflows); i++ {
				at := benchStart.Add(-24*time.Hour + time.Duration(i*stepsPerWorkflow)*step)
				if err := putHistoryWorkflow(tx, i, at, step); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	info, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("filled %d steps in %d workflows in %s; data file %.1f MiB", steps, workflows, time.Since(start).Round(time.Millisecond), float64(info.Size())/(1<<20))
}

// putHistoryWorkflow writes history workflow i, its steps starting at at
// one every step, and their decisions, through the store's own methods so
// that every index is what the engine would have left.
func putHistoryWorkflow(tx *store.Tx, i int, at time.Time, step time.Duration) error {
	rep := historyRep(i)
	wf := store.Workflow{
		ID: fmt.Sprintf("H%07d", i), Ticket: fmt.Sprintf("T-H%07d", i), User: rep, Status: store.WorkflowDone,
		Delegation:     store.Delegation{ID: rep, Role: engine.RoleRep, Region: "EU", Scopes: []string{"lookup", "refund", "reship"}, RefundCeiling: 50000},
		PolicyRevision: "p1", Created: at, Updated: at.Add(stepsPerWorkflow * step), Steps: stepsPerWorkflow,
	}
	if err := tx.PutWorkflow(wf); err != nil {
		return err
	}
	for n := 1; n <= stepsPerWorkflow; n++ {
		s := historyStep(wf.ID, i, n, at.Add(time.Duration(n-1)*step))
		if err := tx.PutStep(s); err != nil {
			return err
		}
		if _, err := tx.AppendDecision(store.Decision{At: s.Created, Workflow: wf.ID, N: n, User: rep, Tool: s.Tool,
			Args: s.Args, Decision: s.Decision, Rule: s.Rule, Revision: "p1"}); err != nil {
			return err
		}
	}
	return nil
}

// historyRep spreads workflows over the reps; rep-ana, whose day the
// measured refunds are decided against, gets her share.
func historyRep(i int) string {
	switch r := i % (historyReps + 2); r {
	case 0:
		return "rep-ana"
	case 1:
		return "rep-ben"
	default:
		return fmt.Sprintf("rep-h%03d", r)
	}
}

// historyStep is step n of history workflow i: refund done, reship done,
// refund done, refund denied.
func historyStep(wf string, i, n int, at time.Time) store.Step {
	order := fmt.Sprintf("O-%d", 20_000_000+(i*7+n)%historyOrders)
	s := store.Step{Workflow: wf, N: n, Tool: tool.IssueRefund, Args: tool.Args{Order: order, Amount: money.Cents(1 + (i+n)%9)},
		Status: store.StepDone, Decision: "allow", Rule: "R4", Attempts: 1, Created: at, ReservedAt: at, Finished: at.Add(30 * time.Millisecond)}
	switch n {
	case 2:
		s.Tool, s.Args.Amount = tool.ReshipOrder, 0
		baseline := 1
		s.Baseline = &baseline
	case 4:
		s.Args.Amount = 60000 // over refund_max
		s.Status, s.Decision, s.Rule, s.Note, s.ReservedAt, s.Attempts = store.StepDenied, "deny", "R3", "denied by policy rule R3", time.Time{}, 0
	}
	s.Call = tool.CallHash(s.Tool, s.Args)
	switch {
	case s.Status != store.StepDone:
	case s.Tool == tool.IssueRefund:
		s.Key = "cs-" + engine.Binding(wf, s.Tool, s.Args)[:40]
		s.Result = json.RawMessage(fmt.Sprintf(`{"id":"L%d","key":%q,"amount":%d}`, i*stepsPerWorkflow+n, s.Key, s.Args.Amount))
	default:
		s.Result = json.RawMessage(fmt.Sprintf(`{"order":%q,"reference":"cs-%s"}`, order, engine.Binding(wf, s.Tool, s.Args)[:40]))
	}
	return s
}

// benchOps numbers the measured proposals across runs, for fresh ids.
var benchOps int

// benchDecideAndReserve opens the engine over the store in dir with the
// default options (every commit fsync'd) and proposes b.N one-cent refunds,
// each in a fresh workflow on a fresh order, timing each proposal.
func benchDecideAndReserve(b *testing.B, dir string) {
	h := newHarness(b, engine.DefaultControls())
	h.db.Close()
	h.db, h.dir = nil, dir
	h.open()
	ctx := context.Background()
	rep := person("rep-ana")
	took := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		benchOps++ // the store outlives this run: ids must not repeat
		wf, order := fmt.Sprintf("B%d", benchOps), fmt.Sprintf("O-%d", 900_000_000+benchOps)
		h.workflow("rep-ana", wf)
		h.sys.orders[order] = h.sys.orders["O-1002"]
		args := json.RawMessage(fmt.Sprintf(`{"order":%q,"amount":1}`, order))
		b.StartTimer()
		t0 := time.Now()
		s, err := h.eng.Propose(ctx, rep, wf, tool.IssueRefund, args)
		took = append(took, time.Since(t0))
		if err != nil {
			b.Fatal(err)
		}
		if s.Status != store.StepDone {
			b.Fatalf("step %s/%d is %s (%s %s), want done: the history left no headroom", wf, s.N, s.Status, s.Decision, s.Rule)
		}
	}
	b.StopTimer()
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(took[len(took)*99/100].Nanoseconds()), "p99-ns")
}
