package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/countersign/countersign/bundles"
	"github.com/countersign/countersign/bundles/loosen"
	"github.com/countersign/countersign/cmd/devstack"
	"github.com/countersign/countersign/executor/impact"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/review"
)

func runImpact(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append([]string{"bundle", "impact"}, args...))
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

// autoLimit75 writes p1 with its auto limit raised from $50.00 to $75.00,
// released as p4, and returns the .tar.gz's path.
func autoLimit75(t *testing.T) string {
	t.Helper()
	p1, err := bundles.Open("p1")
	if err != nil {
		t.Fatal(err)
	}
	data, err := fs.ReadFile(p1, "data.json")
	if err != nil {
		t.Fatal(err)
	}
	raised := strings.Replace(string(data), `"refund_auto": 5000`, `"refund_auto": 7500`, 1)
	if raised == string(data) {
		t.Fatalf("p1's data.json has no refund_auto of 5000:\n%s", data)
	}
	fsys, err := bundles.Variant("p1", "p4", func(s string) string { return s }, map[string]string{"data.json": raised})
	if err != nil {
		t.Fatal(err)
	}
	archive, err := policy.Build(fsys)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "p4.tar.gz")
	if err := os.WriteFile(path, archive, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// The decisions made over HTTP under p1, replayed against p1 with a $75.00
// auto limit: the three refunds between $50 and $75 that waited for an
// approval would be allowed; nothing else changes.
func TestBundleImpact(t *testing.T) {
	dir := t.TempDir()
	st, err := devstack.Start(context.Background(), devstack.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	seedDecisions(t, st)
	candidate := autoLimit75(t)
	if _, err := runImpact(t, "--data", dir, "--lock-timeout", "50ms", candidate); err == nil || !strings.Contains(err.Error(), "is locked") || !strings.Contains(err.Error(), "dry_run=true") {
		t.Errorf("impact beside a running sidecar: %v, want it locked and how to proceed", err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	out, err := runImpact(t, "--data", dir, candidate)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	flat := strings.Join(strings.Fields(out), " ")
	for _, want := range []string{
		"candidate p4 (sha256 ", "6 decisions replayed, 3 would change ($185.00 in all), 0 skipped",
		"FROM TO RULE COUNT AMOUNT EXAMPLES",
		"REQUIRE_APPROVAL ALLOW default-allow-after-checks 3 $185.00 W1/2 O-1002 $60.00, W2/1 O-1002 $70.00, W2/3 O-1005 $55.00",
		"no decision would keep its outcome by another rule",
	} {
		if !strings.Contains(flat, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
	table, rest, _ := strings.Cut(out, "\n\n")
	if rows := strings.Count(table+"\n", "\n"); rows != 4 {
		t.Errorf("%d lines, want a summary, a header, one change and no rule change:\n%s", rows, out)
	}
	// Then the review against the sidecar's active p1: only a limit,
	// raised, and what it lets through.
	for _, want := range []string{"review against p1 (sha256 ", "second operator: needed, it is not a pure tightening:",
		"data.countersign.limits.refund_auto 5000 → 7500 loosens refund_auto", "new allowances: "} {
		if !strings.Contains(rest, want) {
			t.Errorf("the review lacks %q:\n%s", want, rest)
		}
	}

	out, err = runImpact(t, "--data", dir, candidate, "--last", "2", "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var r struct {
		impact.Report
		review.Review
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("--json: %v\n%s", err, out)
	}
	if r.Against.Revision != "p1" || len(r.DataDiff) != 1 || r.NewAllowances.Count == 0 {
		t.Errorf("--json review: %+v", r.Review)
	}
	if r.Replayed != 2 || r.Skipped != 0 || len(r.Changed) != 1 || r.Changed[0].Count != 1 ||
		len(r.Changed[0].Examples) != 1 || r.Changed[0].Examples[0].Workflow != "W2" || r.Changed[0].Examples[0].N != 3 ||
		r.Changed[0].Examples[0].DecisionID == "" || r.Changed[0].Amount != 5500 || r.ChangedAmount != 5500 || r.RuleChanged == nil {
		t.Errorf("the last two decisions: %+v", r)
	}

	out, err = runImpact(t, "--data", dir, releaseFile(t, "p1"))
	if err != nil || !strings.Contains(out, "no decision would change") || !strings.Contains(out, "second operator: not needed, a pure tightening") {
		t.Errorf("p1 against its own decisions: %v\n%s", err, out)
	}

	// A rule for one rep and one order flips no logged decision, and the
	// review shows it.
	ana := filepath.Join(t.TempDir(), "ana.tar.gz")
	writeBundle(t, ana, loosen.AllowAnaOnO1002)
	out, err = runImpact(t, "--data", dir, ana)
	if err != nil || !strings.Contains(out, "no decision would change") || !strings.Contains(out, "+\tinput.user.id == \"rep-ana\"\n") ||
		!strings.Contains(out, "call by rep-ana (EU) issue_refund O-1002 (EU, paid $480.00) $450.00: REQUIRE_APPROVAL (R7-refund-needs-approval) → ALLOW") {
		t.Errorf("the rep-ana rule: %v\n%s", err, out)
	}

	// R7 renamed R13 flips nothing, and the three approvals it would
	// ask for by the new rule are shown apart, with their amount.
	renamed := filepath.Join(t.TempDir(), "renamed.tar.gz")
	writeBundle(t, renamed, func(s string) string {
		return strings.ReplaceAll(s, "R7-refund-needs-approval", "R13-refund-needs-approval")
	})
	out, err = runImpact(t, "--data", dir, renamed)
	flat = strings.Join(strings.Fields(out), " ")
	for _, want := range []string{"6 decisions replayed, 0 would change ($0.00 in all)", "no decision would change",
		"same outcome, another rule: DECISION RULE RECORDED CANDIDATE RULE COUNT AMOUNT EXAMPLES",
		"REQUIRE_APPROVAL R7-refund-needs-approval R13-refund-needs-approval 3 $185.00 W1/2 O-1002 $60.00, W2/1 O-1002 $70.00, W2/3 O-1005 $55.00"} {
		if err != nil || !strings.Contains(flat, want) {
			t.Errorf("R7 renamed R13: %v; the report lacks %q:\n%s", err, want, out)
		}
	}
}

func TestBundleImpactRefuses(t *testing.T) {
	p1 := releaseFile(t, "p1")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no candidate", []string{"--data", t.TempDir()}, "accepts 1 arg"},
		{"no data", []string{p1}, "--data DIR is required"},
		{"not a data dir", []string{"--data", t.TempDir(), p1}, "no sidecar.db in"},
		{"a candidate that is not there", []string{"--data", t.TempDir(), filepath.Join(t.TempDir(), "p9.tar.gz")}, "p9.tar.gz"},
		{"nothing to replay", []string{"--data", t.TempDir(), "--last", "0", p1}, "--last 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := runImpact(t, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

// writeBundle writes p1 with call.rego through edit to path.
func writeBundle(t *testing.T, path string, edit func(string) string) {
	t.Helper()
	fsys, err := bundles.Variant("p1", "p1-edited", edit, nil)
	if err != nil {
		t.Fatal(err)
	}
	archive, err := policy.Build(fsys)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, archive, 0o600); err != nil {
		t.Fatal(err)
	}
}

// releaseFile writes an embedded release to a file and returns its path.
func releaseFile(t *testing.T, name string) string {
	t.Helper()
	archive, err := bundles.Archive(name)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name+".tar.gz")
	if err := os.WriteFile(path, archive, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
