package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/countersign/countersign/bundles"
	"github.com/countersign/countersign/cmd/devstack"
	"github.com/countersign/countersign/executor/policy"
)

// The history survives the sidecar: p1 at start, p2 rejected by the gate,
// p2 again by break-glass, read back from the stopped sidecar's store.
func TestBundleHistory(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	st, err := devstack.Start(ctx, devstack.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	fsys, _ := bundles.Open("p2")
	p2, err := policy.LoadFS(fsys)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Releases.ActivateBundle(ctx, p2, policy.Activation{By: "ops-ida"}); !errors.Is(err, policy.ErrGateFailed) {
		t.Fatalf("p2 through the gate: %v", err)
	}
	if _, err := st.Releases.ActivateBundle(ctx, p2, policy.Activation{By: "ops-jon", Proposer: "ops-ida", BreakGlass: true, Reason: "drill"}); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	out, err := runBundle(t, "history", "--data", dir)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	flat := strings.Join(strings.Fields(out), " ")
	for _, want := range []string{"p1 superseded dev-mode", "p2 rejected ops-ida", "$51.00: expected REQUIRE_APPROVAL got ALLOW", "p2 active ops-jon (proposed by ops-ida)", "limit refund_auto 5000 → 500000", "limit_change_undeclared: expected refund_auto 5000", "break-glass: drill"} {
		if !strings.Contains(flat, want) {
			t.Errorf("history lacks %q:\n%s", want, out)
		}
	}
}
