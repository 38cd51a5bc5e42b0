package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/countersign/countersign/cmd/devstack"
	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/fixture"
	"github.com/countersign/countersign/executor/sim/ledger"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

func runReconcile(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append([]string{"reconcile"}, args...))
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

// seedDir leaves a stopped dev stack under a fresh directory with one clean
// refund, one the ledger lost, a clerk's entry, a warehouse's shipment and
// a refund whose process crashed after the ledger took it.
func seedDir(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	var (
		mu    sync.Mutex
		armed string
	)
	st, err := devstack.Start(ctx, devstack.Options{DataDir: dir, Failpoint: func(point string) error {
		mu.Lock()
		defer mu.Unlock()
		if point == armed {
			armed = ""
			return engine.ErrCrashed
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	p, _ := fixture.PersonByID("rep-ana")
	ana := engine.Person{ID: p.ID, Role: p.Role, Region: p.Region, Scopes: p.Scopes, RefundCeiling: p.RefundCeiling}
	refund := func(wf, args string) error {
		t.Helper()
		if _, _, err := st.Engine.CreateWorkflow(ctx, ana, wf, "T-"+wf); err != nil {
			t.Fatal(err)
		}
		_, err := st.Engine.Propose(ctx, ana, wf, tool.IssueRefund, json.RawMessage(args))
		return err
	}
	if err := refund("W-1", `{"order":"O-1002","amount":1000}`); err != nil {
		t.Fatal(err)
	}
	if err := st.Ledger.SetFaults(ledger.Faults{LoseWrite: 1}); err != nil {
		t.Fatal(err)
	}
	if err := refund("W-2", `{"order":"O-1005","amount":2000}`); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Ledger.AddExternal("O-1002", 5000, "finance-clerk"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Orders.AddExternalShipment("O-1001", "warehouse-ops"); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	armed = "after_dispatch"
	mu.Unlock()
	if err := refund("W-3", `{"order":"O-1002","amount":1500}`); !errors.Is(err, engine.ErrCrashed) {
		t.Fatalf("crash: %v", err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestReconcileCommand(t *testing.T) {
	dir := seedDir(t)

	table, err := runReconcile(t, "--data", dir)
	if err != nil {
		t.Fatalf("reconcile: %v\n%s", err, table)
	}
	for _, line := range []string{
		`(?m)^matched +1$`,
		`(?m)^agent_done_ledger_missing +1  W-2/1 O-1005 \$20\.00$`,
		`(?m)^amount_mismatch +0$`,
		`(?m)^ledger_entry_without_step +1  L\d+ external O-1002 \$50\.00 by finance-clerk$`,
		`(?m)^in_flight_ledger_has_it +1  W-3/1 O-1002 \$15\.00 started \(L\d+\)$`,
		`(?m)^in_flight_ledger_lacks_it +0$`,
		`(?m)^refund_over_limit_without_approval +0$`,
		`(?m)^shipment_count_mismatch +1  O-1001 shipments 1, done reship steps 0$`,
		`(?m)^unexplained differences: 4 `,
		`(?m)^  in_flight_ledger_has_it \(countersign, automatically\): `,
		`(?m)^  ledger_entry_without_step \(a person decides\): `,
	} {
		if !regexp.MustCompile(line).MatchString(table) {
			t.Errorf("table lacks %s:\n%s", line, table)
		}
	}
	if strings.Contains(table, "amount_mismatch (") {
		t.Errorf("the table gives a repair for a class without findings:\n%s", table)
	}

	// JSON, and proof that the first run resumed nothing: the crashed
	// refund is still in flight.
	raw, err := runReconcile(t, "--data", dir, "--json")
	if err != nil {
		t.Fatalf("reconcile --json: %v\n%s", err, raw)
	}
	var r struct {
		Classes     map[string]int             `json:"classes"`
		Findings    map[string]json.RawMessage `json:"findings"`
		Repairs     map[string]any             `json:"repairs"`
		Unexplained int                        `json:"unexplained"`
	}
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		t.Fatalf("--json output: %v\n%s", err, raw)
	}
	want := map[string]int{
		"matched": 1, "agent_done_ledger_missing": 1, "amount_mismatch": 0, "ledger_entry_without_step": 1,
		"in_flight_ledger_has_it": 1, "in_flight_ledger_lacks_it": 0, "refund_over_limit_without_approval": 0,
		"shipment_count_mismatch": 1,
	}
	for c, n := range want {
		if got, ok := r.Classes[c]; !ok || got != n {
			t.Errorf("classes[%s] = %d (present %v), want %d", c, got, ok, n)
		}
		if _, ok := r.Findings[c]; !ok {
			t.Errorf("findings lacks %s", c)
		}
	}
	if len(r.Classes) != 8 || len(r.Findings) != 8 || len(r.Repairs) != 7 || r.Unexplained != 4 {
		t.Errorf("classes %d findings %d repairs %d unexplained %d", len(r.Classes), len(r.Findings), len(r.Repairs), r.Unexplained)
	}

	// With the sidecar running over the directory, the command says what
	// to do instead of waiting or reading half a picture.
	st, err := devstack.Start(context.Background(), devstack.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	_, err = runReconcile(t, "--data", dir)
	if !errors.Is(err, store.ErrLocked) || !strings.Contains(err.Error(), "stop it") {
		t.Errorf("reconcile beside a running sidecar: %v, want store.ErrLocked and how to proceed", err)
	}
	if exitCode(err) != 1 {
		t.Errorf("exit code %d, want 1", exitCode(err))
	}
}

func TestReconcileCommandRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no data", nil, "--data DIR is required"},
		{"not a data dir", []string{"--data", t.TempDir()}, "no countersign data"},
		{"extra argument", []string{"--data", t.TempDir(), "now"}, "unknown command"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := runReconcile(t, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want it to mention %q", err, tc.want)
			}
		})
	}
}
