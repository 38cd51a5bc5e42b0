package monitor_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/monitor"
	"github.com/countersign/countersign/executor/simclock"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

var t0 = time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)

func TestMonitor(t *testing.T) {
	db, err := store.Open(filepath.Join(t.TempDir(), "s.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := t0
	var sunk []monitor.Alert
	m, err := monitor.New(monitor.Options{Store: db, Clock: simclock.New(now), Sink: func(a monitor.Alert) error {
		sunk = append(sunk, a)
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	refund := func(wf string, amount money.Cents, approval string) {
		t.Helper()
		err := db.Update(func(tx *store.Tx) error {
			if err := tx.CreateWorkflow(store.Workflow{ID: wf, User: "rep-ana"}); err != nil {
				return err
			}
			args := tool.Args{Order: "O-1002", Amount: amount}
			if _, err := tx.AppendDecision(store.Decision{At: now, Workflow: wf, N: 1, Tool: tool.IssueRefund, Args: args, Decision: "ALLOW"}); err != nil {
				return err
			}
			return tx.PutStep(store.Step{Workflow: wf, N: 1, Tool: tool.IssueRefund, Args: args, Call: wf,
				Status: store.StepDone, Approval: approval, ReservedAt: now, Finished: now})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	check := func(want ...string) {
		t.Helper()
		alerts, err := m.Check(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var kinds []string
		for _, a := range alerts {
			kinds = append(kinds, a.Kind)
		}
		if len(kinds) != len(want) || (len(want) > 0 && kinds[0] != want[0]) {
			t.Fatalf("alerts %v, want %v", kinds, want)
		}
	}

	refund("W-small", 4900, "")
	check() // under the auto limit: fine
	db.Update(func(tx *store.Tx) error {
		return tx.PutApproval(store.Approval{ID: "AP-1", Status: store.ApprovalUsed})
	})
	refund("W-approved", 12000, "AP-1")
	check() // above, with a used approval: fine
	refund("W-bad", 12000, "")
	check(monitor.KindInvariant)
	check() // alerted once, not again
	refund("W-bad2", 30000, "")
	refund("W-bad3", 20000, "")
	// Three refunds above the limit allowed in the hour, no approval asked.
	check(monitor.KindInvariant, monitor.KindProcessShape)
	check()
	if len(sunk) != 3 || len(sunk[1].Steps) != 2 {
		t.Fatalf("sink got %d alerts: %+v", len(sunk), sunk)
	}
}
