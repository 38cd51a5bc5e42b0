package effectiveness_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/countersign/countersign/executor/effectiveness"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

var t0 = time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)

// The parts the HTTP test cannot reach in a few calls: unknown outcomes,
// open or resolved, compensations (a reversal and a ratification), the
// median wait for approval, expiries, and the since bound.
func TestComputeCountsEachOutcome(t *testing.T) {
	db, err := store.Open(filepath.Join(t.TempDir(), "s.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	refund := tool.Args{Order: "O-1", Amount: 1000}
	err = db.Update(func(tx *store.Tx) error {
		if err := tx.CreateWorkflow(store.Workflow{ID: "W", User: "rep-ana", AgentVersion: "v3", Created: t0}); err != nil {
			return err
		}
		steps := []store.Step{
			{N: 1, Status: store.StepUnknown, Created: t0},
			{N: 2, Status: store.StepDone, Note: "resolved by lookup: the ledger has the entry", Created: t0},
			{N: 3, Status: store.StepCompensated, Created: t0},
			{N: 4, Status: store.StepDone, Created: t0.Add(-time.Hour)}, // before since
		}
		for _, s := range steps {
			s.Workflow, s.Tool, s.Args, s.ReservedAt = "W", tool.IssueRefund, refund, s.Created
			if err := tx.PutStep(s); err != nil {
				return err
			}
		}
		approvals := []store.Approval{
			{ID: "AP-1", Status: store.ApprovalUsed, Created: t0, Decided: t0.Add(30 * time.Second)},
			{ID: "AP-2", Status: store.ApprovalApproved, Created: t0, Decided: t0.Add(90 * time.Second)},
			{ID: "AP-3", Status: store.ApprovalApproved, Created: t0, Decided: t0.Add(10 * time.Minute)},
			{ID: "AP-4", Status: store.ApprovalExpired, Created: t0},
			{ID: "AP-5", Status: store.ApprovalUsed, Retroactive: true, Created: t0, Decided: t0},
		}
		for _, a := range approvals {
			a.Workflow, a.Tool, a.Args = "W", tool.IssueRefund, refund
			if err := tx.PutApproval(a); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := effectiveness.Compute(db, t0, t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Rows) != 1 {
		t.Fatalf("rows %+v", r.Rows)
	}
	got := r.Rows[0]
	want := effectiveness.Row{Tool: "issue_refund", AgentVersion: "v3", Proposals: 3, Compensations: 2,
		Unknown:   effectiveness.Unknown{Open: 1, ResolvedByLookup: 1},
		Approvals: effectiveness.Approvals{Requested: 4, Approved: 3, Expired: 1, P50SecondsToApproval: 90}}
	if got.Proposals != want.Proposals || got.Compensations != want.Compensations || got.Unknown != want.Unknown || got.Approvals != want.Approvals {
		t.Errorf("row\n %+v\nwant\n %+v", got, want)
	}
}
