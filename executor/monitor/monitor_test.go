package monitor_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/bundles"
	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/monitor"
	"github.com/countersign/countersign/executor/policy"
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

// withAuto is release p1 under another revision with refund_auto set to
// cents: its archive and digest.
func withAuto(t *testing.T, revision string, cents int64) ([]byte, string) {
	t.Helper()
	p1, err := bundles.Open("p1")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := fs.ReadFile(p1, "data.json")
	if err != nil {
		t.Fatal(err)
	}
	var data map[string]map[string]map[string]any
	if err := json.Unmarshal(raw, &data); err != nil {
		t.Fatal(err)
	}
	data["countersign"]["limits"]["refund_auto"] = cents
	if raw, err = json.Marshal(data); err != nil {
		t.Fatal(err)
	}
	fsys, err := bundles.Variant("p1", revision, func(s string) string { return s }, map[string]string{"data.json": string(raw)})
	if err != nil {
		t.Fatal(err)
	}
	archive, err := policy.Build(fsys)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(archive)
	return archive, hex.EncodeToString(sum[:])
}

// Each refund is judged against the auto limit of the bundle whose
// decision let it run, whichever bundle is in force when the monitor
// looks: a refund that a bundle two operators put in force allowed within
// its own limit raises nothing after a rollback; one above that bundle's
// own limit, one a break-glass release let through and one whose bundle
// the log does not name are alerts, each held to the limit it says. The
// process shape counts a refund allowed within its own bundle's limit as
// no sign of a missing approval step.
func TestMonitorJudgesEachRefundByTheBundleThatDecidedIt(t *testing.T) {
	db, err := store.Open(filepath.Join(t.TempDir(), "s.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	p1, err := bundles.Archive("p1")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(p1)
	p1d := hex.EncodeToString(sum[:])
	raised, raisedD := withAuto(t, "p1-raised", 7500)
	glass, glassD := withAuto(t, "p1-glass", 500000)
	err = db.Update(func(tx *store.Tx) error {
		for _, b := range []struct {
			rec  store.BundleRecord
			blob []byte
		}{
			{store.BundleRecord{Revision: "p1", Digest: p1d, Status: store.BundleActive, By: "serve", At: t0}, p1},
			{store.BundleRecord{Revision: "p1-raised", Digest: raisedD, Status: store.BundleActive, By: "ops-jon", Proposer: "ops-ida", At: t0}, raised},
			{store.BundleRecord{Revision: "p1-glass", Digest: glassD, Status: store.BundleActive, By: "ops-jon", Proposer: "ops-ida", BreakGlass: true, Reason: "incident", At: t0}, glass},
			{store.BundleRecord{Revision: "p1", Digest: p1d, Status: store.BundleActive, By: "ops-ida", Rollback: true, At: t0}, nil},
		} {
			if _, err := tx.AppendBundle(b.rec, b.blob); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	refund := func(wf string, amount money.Cents, revision, digest string) {
		t.Helper()
		err := db.Update(func(tx *store.Tx) error {
			if err := tx.CreateWorkflow(store.Workflow{ID: wf, User: "rep-ana"}); err != nil {
				return err
			}
			args := tool.Args{Order: "O-1002", Amount: amount}
			if _, err := tx.AppendDecision(store.Decision{At: t0, Workflow: wf, N: 1, Tool: tool.IssueRefund, Args: args,
				Decision: "ALLOW", Revision: revision, Digest: digest}); err != nil {
				return err
			}
			return tx.PutStep(store.Step{Workflow: wf, N: 1, Tool: tool.IssueRefund, Args: args, Call: wf,
				Status: store.StepDone, ReservedAt: t0, Finished: t0})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	m, err := monitor.New(monitor.Options{Store: db, Clock: simclock.New(t0.Add(time.Minute))})
	if err != nil {
		t.Fatal(err)
	}
	check := func() []monitor.Alert {
		t.Helper()
		alerts, err := m.Check(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return alerts
	}

	for _, wf := range []string{"W-raised-1", "W-raised-2", "W-raised-3"} {
		refund(wf, 7000, "p1-raised", raisedD)
	}
	if alerts := check(); len(alerts) != 0 {
		t.Fatalf("refunds within the limit of the bundle that decided them: %+v", alerts)
	}

	refund("W-over-own", 8000, "p1-raised", raisedD)
	refund("W-glass", 7000, "p1-glass", glassD)
	refund("W-unnamed", 6000, "p1", "")
	alerts := check()
	want := map[string]monitor.Violation{
		"W-over-own": {Limit: 7500, Revision: "p1-raised"},
		"W-glass":    {Limit: 5000, Revision: "p1-glass", Note: "breaking the glass"},
		"W-unnamed":  {Limit: 5000, Revision: "p1", Note: "names no bundle"},
	}
	var invariant, shape int
	for _, a := range alerts {
		switch a.Kind {
		case monitor.KindProcessShape:
			shape++
		case monitor.KindInvariant:
			invariant++
			for _, v := range a.Steps {
				w, ok := want[v.Workflow]
				if !ok {
					t.Errorf("alerted %s", v.Workflow)
					continue
				}
				delete(want, v.Workflow)
				if v.Limit != w.Limit || v.Revision != w.Revision || (w.Note == "") != (v.Note == "") || !strings.Contains(v.Note, w.Note) {
					t.Errorf("%s: %+v, want limit %s, revision %q, a note containing %q", v.Workflow, v, w.Limit, w.Revision, w.Note)
				}
			}
			if !strings.Contains(a.Message, "the auto limit of the bundle that decided each") {
				t.Errorf("message %q, for violations held to different limits", a.Message)
			}
		}
	}
	if invariant != 1 || len(want) != 0 {
		t.Errorf("%d invariant alerts, not alerted %v", invariant, want)
	}
	// Three refunds allowed above the limit they are held to, no approval
	// asked: the three within p1-raised's own limit are not among them.
	if shape != 1 {
		t.Errorf("%d process-shape alerts, want 1 (the three above their limits)", shape)
	}
}
