package reconcile_test

import (
	"fmt"
	"time"

	"github.com/countersign/countersign/executor/dispatch"
	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/reconcile"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

// A refund the ledger agrees with, one it recorded at a tenth of the
// amount, and a clerk's manual entry.
func ExampleClassify() {
	at := time.Date(2026, 5, 4, 9, 30, 0, 0, time.UTC)
	step := func(wf string, order string, amount int) store.Step {
		return store.Step{Workflow: wf, N: 1, Tool: tool.IssueRefund, Key: "k-" + wf, Status: store.StepDone,
			Args: tool.Args{Order: order, Amount: money.Cents(amount)}, Finished: at}
	}
	in := reconcile.Input{
		Records: reconcile.Records{
			Workflows: []store.Workflow{{ID: "W1", User: "rep-ana"}, {ID: "W2", User: "rep-ana"}},
			Steps:     []store.Step{step("W1", "O-1001", 3000), step("W2", "O-1002", 2000)},
		},
		Entries: []dispatch.Entry{
			{ID: "L1", Kind: "refund", Key: "k-W1", Order: "O-1001", Amount: 3000, By: "rep-ana"},
			{ID: "L2", Kind: "refund", Key: "k-W2", Order: "O-1002", Amount: 200, By: "rep-ana"},
			{ID: "L3", Kind: "external", Order: "O-1003", Amount: 5000, By: "finance-clerk"},
		},
	}
	r := reconcile.Classify(in, 0)
	r.At = at
	fmt.Print(r.Table())
	// Output:
	// reconciliation at 2026-05-04T09:30:00Z (auto limit $50.00)
	// matched                                 1
	// agent_done_ledger_missing               0
	// amount_mismatch                         1  W2/1 O-1002 step $20.00 ledger $2.00 (L2)
	// ledger_entry_without_step               1  L3 external O-1003 $50.00 by finance-clerk
	// in_flight_ledger_has_it                 0
	// in_flight_ledger_lacks_it               0
	// refund_over_limit_without_approval      0
	// shipment_count_mismatch                 0
	// unexplained differences: 2 (explained: 0 reversed, 0 ratified)
	//
	// who may act on each class with findings
	//   amount_mismatch (finance decides): freeze the step and the entry as they are; finance establishes the right amount and corrects it with a new entry; neither record is overwritten
	//   ledger_entry_without_step (a person decides): decide what the entry is: made outside countersign (leave it, nothing to do) or an agent refund whose record was lost (adopt it by its key)
}
