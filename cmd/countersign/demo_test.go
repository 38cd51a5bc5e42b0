package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/countersign/countersign/cmd/scenario/demo"
	"github.com/countersign/countersign/executor/reconcile"
)

// TestDemoJSON runs `countersign demo --json` as a user would and checks
// the keys it promises and the figures every section must show.
func TestDemoJSON(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // the demo's temporary directory goes here
	cmd := newDemoCmd()
	var stdout, stderr bytes.Buffer
	cmd.SetOut(&stdout)
	cmd.SetErr(&stderr)
	cmd.SetArgs([]string{"--json"})
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("demo --json: %v\nstderr:\n%s", err, stderr.String())
	}

	var keys map[string]json.RawMessage
	if err := json.Unmarshal(stdout.Bytes(), &keys); err != nil {
		t.Fatalf("stdout is not one JSON object: %v", err)
	}
	for _, k := range []string{"policy_decisions", "approval_authority", "binding", "gate", "crash_matrix", "reconciliation", "controls"} {
		if len(keys[k]) == 0 || string(keys[k]) == "null" {
			t.Errorf("key %q missing", k)
		}
	}
	if len(keys) != 7 {
		t.Errorf("%d keys, want 7", len(keys))
	}
	var r demo.Report
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatal(err)
	}

	t.Run("policy decisions", func(t *testing.T) {
		want := []string{
			"ALLOW default-allow-after-checks", "REQUIRE_APPROVAL R7-refund-needs-approval", "DENY R3-refund-over-ceiling",
			"DENY R2-order-outside-region", "DENY R1-scope-not-delegated", "DENY R4-exceeds-amount-paid",
		}
		var got []string
		for _, row := range r.PolicyDecisions.Rows {
			got = append(got, row.Decision+" "+row.Rule)
		}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("decisions %q, want %q", got, want)
		}
	})
	t.Run("approval authority", func(t *testing.T) {
		a := r.ApprovalAuthority
		var got []string
		for _, at := range a.Attempts {
			got = append(got, at.Approver+":"+at.Outcome)
		}
		want := "rep-ben:requester_cannot_approve|rep-cy:forbidden_role|lead-fay:above_approver_limit|lead-dee:approver_outside_region|lead-eli:approval_expired"
		if strings.Join(got, "|") != want {
			t.Errorf("attempts %q", got)
		}
		if a.RefundsExecuted != 0 || a.ApprovalStatus != "expired" {
			t.Errorf("refunds %d, approval %s", a.RefundsExecuted, a.ApprovalStatus)
		}
		if a.Summary != "Refund $400.00 on order O-1004 for customer-4; requested by rep-ben; workflow W1" {
			t.Errorf("summary %q", a.Summary)
		}
	})
	t.Run("binding", func(t *testing.T) {
		b := r.Binding
		if b.ApproveOutcome != "approved" || b.StepStatus != "waiting_approval" || b.Refunds != 0 ||
			b.FirstApprovalStatus != "void" || b.NewApproval != "AP-2" || b.NewApprovalStatus != "pending" || b.NewApprovalAmount != 45000 {
			t.Errorf("binding %+v", b)
		}
	})
	t.Run("gate", func(t *testing.T) {
		g := r.Gate
		if len(g.Runs) != 2 || !g.Runs[0].Passed || len(g.Runs[0].Failures) != 0 || g.Runs[1].Passed {
			t.Fatalf("gate %+v", g.Runs)
		}
		var got []string
		for _, f := range g.Runs[1].Failures {
			got = append(got, f.Amount.String()+" "+f.Expected+"->"+f.Got)
		}
		want := "$51.00 REQUIRE_APPROVAL->ALLOW|$500.00 REQUIRE_APPROVAL->ALLOW|$501.00 DENY->ALLOW"
		if strings.Join(got, "|") != want {
			t.Errorf("p2 failures %q", got)
		}
		if !g.Rejected || g.ActiveAfter != "p1" {
			t.Errorf("p2 offered to a sidecar: rejected %v, active %s", g.Rejected, g.ActiveAfter)
		}
	})
	t.Run("crash matrix", func(t *testing.T) {
		if len(r.CrashMatrix.Rows) != 6 {
			t.Fatalf("%d rows", len(r.CrashMatrix.Rows))
		}
		for _, row := range r.CrashMatrix.Rows {
			noWAL := 1
			if row.Step == "reship" && row.Point == "after_dispatch" {
				noWAL = 2
			}
			if row.Designed.Effects != 1 || row.WithoutWriteAhead.Effects != noWAL {
				t.Errorf("%s at %s: designed %d, without write-ahead %d (want 1, %d)",
					row.Step, row.Point, row.Designed.Effects, row.WithoutWriteAhead.Effects, noWAL)
			}
		}
	})
	t.Run("reconciliation", func(t *testing.T) {
		rc := r.Reconciliation
		for _, c := range reconcile.Classes() {
			want := 1
			if c == reconcile.Matched {
				want = 4
			}
			if got := rc.Before.Count(c); got != want {
				t.Errorf("before: %s %d, want %d", c, got, want)
			}
		}
		if rc.After.Count(reconcile.Matched) != 6 || rc.After.Count(reconcile.InFlightLedgerHasIt) != 0 ||
			rc.After.Count(reconcile.InFlightLedgerLacksIt) != 0 || rc.After.Unexplained != 5 {
			t.Errorf("after the restart: %v, unexplained %d", rc.After.Classes, rc.After.Unexplained)
		}
	})
	t.Run("controls", func(t *testing.T) {
		m := r.Controls
		if len(m.Rows) != len(demo.Checks()) || len(m.Layering) != 2 {
			t.Fatalf("%d rows, %d layering lines", len(m.Rows), len(m.Layering))
		}
		if p := m.Problems(); len(p) > 0 {
			t.Errorf("problems: %q", p)
		}
	})

	t.Run("text", func(t *testing.T) {
		var b strings.Builder
		if err := r.WriteText(&b); err != nil {
			t.Fatal(err)
		}
		out, last := b.String(), -1
		for _, heading := range []string{"1. policy decisions", "2. approval authority", "3. binding", "4. the policy gate",
			"crash matrix", "reconciliation", "control-removal matrix", "layering"} {
			i := strings.Index(out, heading)
			if i < 0 || i < last {
				t.Fatalf("%q missing or out of order in:\n%s", heading, out)
			}
			last = i
		}
	})

	if n := strings.Count(stderr.String(), "demo: ["); n != 7 {
		t.Errorf("%d progress lines on stderr, want 7:\n%s", n, stderr.String())
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("the demo left %d entries in its temporary directory's parent", len(left))
	}
}
