package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/countersign/countersign/cmd/devstack"
	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/fixture"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/tool"
)

// countersign shadow report reads a stopped stack's shadow period: a
// refund the agent would have paid and a clerk paid too (agreement), one
// it would have paid that nobody paid, and one a clerk paid that it would
// have denied.
func TestShadowReportCommand(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := devstack.Start(ctx, devstack.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Engine.SetMode(ctx, engine.Person{ID: "ops-ida", Role: engine.RoleOperator}, tool.IssueRefund, policy.ModeShadow, "first week"); err != nil {
		t.Fatal(err)
	}
	p, _ := fixture.PersonByID("rep-ana")
	ana := engine.Person{ID: p.ID, Role: p.Role, Region: p.Region, Scopes: p.Scopes, RefundCeiling: p.RefundCeiling}
	if _, _, err := st.Engine.CreateWorkflow(ctx, ana, "W1", "T-1"); err != nil {
		t.Fatal(err)
	}
	for _, args := range []string{`{"order":"O-1001","amount":3000}`, `{"order":"O-1002","amount":4000}`, `{"order":"O-1003","amount":2000}`} {
		if s, err := st.Engine.Propose(ctx, ana, "W1", tool.IssueRefund, json.RawMessage(args)); err != nil || s.Status != "shadowed" {
			t.Fatalf("propose %s: %s, %v", args, s.Status, err)
		}
	}
	for _, order := range []string{"O-1001", "O-1003"} {
		if _, err := st.Ledger.AddExternal(order, 2500, "finance-clerk"); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs([]string{"shadow", "report", "--data", dir})
	if err := root.ExecuteContext(ctx); err != nil {
		t.Fatalf("shadow report: %v\n%s", err, out.String())
	}
	for _, want := range []string{"3 proposals over 3 orders; agreement on 1 of 3",
		"would have paid, nothing was paid: 1\n  O-1002 issue_refund: proposed 4000 cents",
		"paid by people, the agent would not have: 1\n  O-1003 issue_refund: proposed 0 cents in 1 proposals; paid 2500 cents, shipped 0, by [finance-clerk]"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report does not say %q:\n%s", want, out.String())
		}
	}
}
