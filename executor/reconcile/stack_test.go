package reconcile_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/bundles"
	"github.com/countersign/countersign/cmd/devstack"
	"github.com/countersign/countersign/executor/dispatch"
	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/reconcile"
	"github.com/countersign/countersign/executor/sim/ledger"
	"github.com/countersign/countersign/executor/store"
)

// crashOnce is a failpoint that crashes once at the point it is armed for.
type crashOnce struct {
	mu    sync.Mutex
	point string
}

func (c *crashOnce) arm(point string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.point = point
}

func (c *crashOnce) hook(point string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.point != "" && c.point == point {
		c.point = ""
		return engine.ErrCrashed
	}
	return nil
}

// agent drives a stack through the sidecar's API with the dev tokens.
type agent struct {
	t  *testing.T
	st *devstack.Stack
	hc *http.Client
}

func (a agent) post(who, path string, body any) (int, []byte) {
	a.t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		a.t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, a.st.Endpoints.Sidecar+path, bytes.NewReader(b))
	if err != nil {
		a.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+a.st.Tokens[who])
	req.Header.Set("Content-Type", "application/json")
	res, err := a.hc.Do(req)
	if err != nil {
		a.t.Fatalf("POST %s: %v", path, err)
	}
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	if err != nil {
		a.t.Fatal(err)
	}
	return res.StatusCode, out
}

// step opens workflow wf for rep and proposes one call; it returns the
// HTTP status and the step's status ("" when the answer is an error).
func (a agent) step(rep, wf, toolName string, args map[string]any) (int, string) {
	a.t.Helper()
	if code, body := a.post(rep, "/v1/workflows", map[string]string{"id": wf, "ticket": "T-" + wf}); code != http.StatusCreated {
		a.t.Fatalf("create %s: %d %s", wf, code, body)
	}
	code, body := a.post(rep, "/v1/workflows/"+wf+"/steps", map[string]any{"tool": toolName, "args": args})
	var s struct {
		Status string `json:"status"`
	}
	_ = json.Unmarshal(body, &s)
	return code, s.Status
}

// done proposes a call that must execute.
func (a agent) done(rep, wf, toolName string, args map[string]any) {
	a.t.Helper()
	if code, status := a.step(rep, wf, toolName, args); code != http.StatusOK || status != "done" {
		a.t.Fatalf("%s %s %v: %d %s, want 200 done", wf, toolName, args, code, status)
	}
}

func refundArgs(order string, cents int) map[string]any {
	return map[string]any{"order": order, "amount": cents}
}

func startStack(t *testing.T, dir string, failpoint func(string) error) *devstack.Stack {
	t.Helper()
	st, err := devstack.Start(context.Background(), devstack.Options{DataDir: dir, Failpoint: failpoint})
	if err != nil {
		t.Fatalf("devstack.Start: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func jobFor(t *testing.T, st *devstack.Stack) *reconcile.Job {
	t.Helper()
	j, err := reconcile.New(reconcile.Options{
		Records:   reconcile.FromStore(st.Store),
		Ledger:    dispatch.NewLedger(st.Endpoints.Ledger, nil),
		Shipments: dispatch.NewOrders(st.Endpoints.Orders, nil),
	})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func loadBundle(t *testing.T, name string) *policy.Bundle {
	t.Helper()
	fsys, err := bundles.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	b, err := policy.LoadFS(fsys)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSeededFailuresThenResume seeds one example of every failure class
// through the systems of record's fault injection, the engine's failpoints
// and a break-glass release (never by writing records), checks that
// reconciliation finds exactly one finding per failure class besides the
// matches, then restarts the stack over the same directory and checks that
// resuming turned both in-flight findings into matches.
func TestSeededFailuresThenResume(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	crash := &crashOnce{}
	st := startStack(t, dir, crash.hook)
	a := agent{t: t, st: st, hc: &http.Client{Timeout: 30 * time.Second}}

	// Clean work: three refunds and a reshipment that the records agree on.
	a.done("rep-ana", "W-clean-1", "issue_refund", refundArgs("O-1002", 1000))
	a.done("rep-ben", "W-clean-2", "issue_refund", refundArgs("O-1004", 1000))
	a.done("rep-ben", "W-clean-3", "issue_refund", refundArgs("O-1003", 500))
	a.done("rep-ben", "W-reship", "reship_order", map[string]any{"order": "O-1003"})

	// The ledger acknowledges a refund and loses it.
	if err := st.Ledger.SetFaults(ledger.Faults{LoseWrite: 1}); err != nil {
		t.Fatal(err)
	}
	a.done("rep-ben", "W-lost", "issue_refund", refundArgs("O-1003", 1000))
	// The ledger's adapter records a tenth of the amount.
	if err := st.Ledger.SetFaults(ledger.Faults{WrongAmount: 1}); err != nil {
		t.Fatal(err)
	}
	a.done("rep-ana", "W-adapter", "issue_refund", refundArgs("O-1005", 2000))
	// A finance clerk refunds by hand; a warehouse ships by hand.
	ext, err := st.Ledger.AddExternal("O-1002", 5000, "finance-clerk")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Orders.AddExternalShipment("O-1004", "warehouse-ops"); err != nil {
		t.Fatal(err)
	}
	// Crashes: after the ledger took the refund, and before it was sent.
	crash.arm("after_dispatch")
	if code, _ := a.step("rep-ana", "W-crash-after", "issue_refund", refundArgs("O-1002", 1500)); code < 500 {
		t.Fatalf("crash after dispatch answered %d", code)
	}
	crash.arm("before_dispatch")
	if code, _ := a.step("rep-ben", "W-crash-before", "issue_refund", refundArgs("O-1004", 1500)); code < 500 {
		t.Fatalf("crash before dispatch answered %d", code)
	}
	// A break-glass release of p2 (auto limit 100 times too large) lets a
	// $120 refund through without an approval.
	if _, err := st.Releases.ActivateBundle(ctx, loadBundle(t, "p2"), policy.Activation{By: "ops-jon", Proposer: "ops-ida", BreakGlass: true, Reason: "test"}); err != nil {
		t.Fatalf("break-glass p2: %v", err)
	}
	a.done("rep-ana", "W-p2", "issue_refund", refundArgs("O-1001", 12000))
	// Back by rollback: a tightening, through the gate at once.
	if _, err := st.Releases.ActivateBundle(ctx, loadBundle(t, "p1"), policy.Activation{By: "ops-ida", Rollback: true}); err != nil {
		t.Fatalf("back to p1: %v", err)
	}

	entriesBefore, err := st.Ledger.Entries()
	if err != nil {
		t.Fatal(err)
	}
	r, err := jobFor(t, st).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("before the restart:\n%s", r.Table())
	want := map[reconcile.Class]int{
		reconcile.Matched:                        4, // three clean refunds and the p2 refund
		reconcile.AgentDoneLedgerMissing:         1,
		reconcile.AmountMismatch:                 1,
		reconcile.LedgerEntryWithoutStep:         1,
		reconcile.InFlightLedgerHasIt:            1,
		reconcile.InFlightLedgerLacksIt:          1,
		reconcile.RefundOverLimitWithoutApproval: 1,
		reconcile.ShipmentCountMismatch:          1,
	}
	checkCounts(t, r, want)
	f := r.Findings
	if len(f.AgentDoneLedgerMissing) == 1 {
		if m := f.AgentDoneLedgerMissing[0]; m.StepRef != ref("W-lost", 1, "O-1003") || m.Amount != 1000 {
			t.Errorf("missing: %+v", m)
		}
	}
	if len(f.AmountMismatch) == 1 {
		if m := f.AmountMismatch[0]; m.StepRef != ref("W-adapter", 1, "O-1005") || m.StepAmount != 2000 || m.LedgerAmount != 200 {
			t.Errorf("mismatch: %+v", m)
		}
	}
	if len(f.LedgerEntryWithoutStep) == 1 {
		if u := f.LedgerEntryWithoutStep[0]; u.Entry != ext.ID || u.Kind != "external" || u.By != "finance-clerk" || u.Amount != 5000 || u.Order != "O-1002" {
			t.Errorf("entry without step: %+v", u)
		}
	}
	if len(f.InFlightLedgerHasIt) == 1 {
		if i := f.InFlightLedgerHasIt[0]; i.StepRef != ref("W-crash-after", 1, "O-1002") || i.Status != store.StepStarted || i.Entry == "" {
			t.Errorf("in flight, ledger has it: %+v", i)
		}
	}
	if len(f.InFlightLedgerLacksIt) == 1 {
		if i := f.InFlightLedgerLacksIt[0]; i.StepRef != ref("W-crash-before", 1, "O-1004") || i.Status != store.StepStarted {
			t.Errorf("in flight, ledger lacks it: %+v", i)
		}
	}
	if len(f.RefundOverLimitWithoutApproval) == 1 {
		if o := f.RefundOverLimitWithoutApproval[0]; o.StepRef != ref("W-p2", 1, "O-1001") || o.Amount != 12000 || o.Rep != "rep-ana" || o.At.IsZero() {
			t.Errorf("over limit: %+v", o)
		}
	}
	if len(f.ShipmentCountMismatch) == 1 {
		if d := f.ShipmentCountMismatch[0]; d != (reconcile.ShipmentDifference{Order: "O-1004", Shipments: 1, Steps: 0}) {
			t.Errorf("shipments: %+v", d)
		}
	}

	// Reconciliation classifies; it wrote nothing anywhere.
	entriesAfter, err := st.Ledger.Entries()
	if err != nil {
		t.Fatal(err)
	}
	if len(entriesAfter) != len(entriesBefore) {
		t.Errorf("the ledger went from %d to %d entries during reconciliation", len(entriesBefore), len(entriesAfter))
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	// The successor's start resumes both in-flight refunds with their keys.
	st2 := startStack(t, dir, nil)
	r2, err := jobFor(t, st2).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("after the restart:\n%s", r2.Table())
	want[reconcile.Matched] = 6
	want[reconcile.InFlightLedgerHasIt] = 0
	want[reconcile.InFlightLedgerLacksIt] = 0
	checkCounts(t, r2, want)
	if r2.Unexplained != 5 {
		t.Errorf("unexplained %d after the restart, want 5", r2.Unexplained)
	}
	// The crashed-after-dispatch refund was replayed, not paid again.
	entries, err := st2.Ledger.Entries()
	if err != nil {
		t.Fatal(err)
	}
	perOrder := map[string]int{}
	for _, e := range entries {
		if e.Kind == ledger.KindRefund {
			perOrder[e.Order]++
		}
	}
	if perOrder["O-1002"] != 2 { // W-clean-1 and W-crash-after, once each
		t.Errorf("O-1002 has %d agent refunds in the ledger, want 2", perOrder["O-1002"])
	}
}

func checkCounts(t *testing.T, r reconcile.Report, want map[reconcile.Class]int) {
	t.Helper()
	for _, c := range reconcile.Classes() {
		if got := r.Count(c); got != want[c] {
			t.Errorf("%s: %d, want %d", c, got, want[c])
		}
	}
	if t.Failed() {
		t.Logf("report:\n%s", r.Table())
	}
}

// TestFromStoreClosed: the store source passes the store's errors on and
// honours a canceled context.
func TestFromStoreClosed(t *testing.T) {
	db, err := store.Open(t.TempDir()+"/sidecar.db", store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reconcile.FromStore(db).Records(context.Background()); err != nil {
		t.Fatalf("empty store: %v", err)
	}
	db.Close()
	if _, err := reconcile.FromStore(db).Records(context.Background()); err == nil {
		t.Fatal("a closed store read without error")
	}
	if _, err := reconcile.FromStore(db).Records(canceled()); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled context: %v", err)
	}
}

func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}
