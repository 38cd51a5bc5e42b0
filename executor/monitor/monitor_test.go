package monitor_test

import (
	"context"
	"path/filepath"
	"slices"
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
	watcher := func() *monitor.Monitor {
		m, err := monitor.New(monitor.Options{Store: db, Clock: simclock.New(now), Record: func(_ *store.Tx, a monitor.Alert) error {
			sunk = append(sunk, a)
			return nil
		}})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	// Two watchers of one store, as two sidecars of a fleet run them: each
	// alert is raised once, by whichever checks first.
	watchers := []*monitor.Monitor{watcher(), watcher()}
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
		var kinds []string
		for _, m := range watchers {
			alerts, err := m.Check(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range alerts {
				kinds = append(kinds, a.Kind)
			}
		}
		if !slices.Equal(kinds, want) {
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
		t.Fatalf("recorded %d alerts: %+v", len(sunk), sunk)
	}
	// A watcher started later, as after a restart, raises none of them again.
	watchers = []*monitor.Monitor{watcher()}
	check()
}
