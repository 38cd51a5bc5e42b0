package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// runDrill runs the drill command and returns what it printed on stdout
// and on stderr.
func runDrill(t *testing.T, args ...string) (stdout, stderr string) {
	t.Helper()
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(append([]string{"drill"}, args...))
	if err := root.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("drill %v: %v\n%s", args, err, errOut.String())
	}
	return out.String(), errOut.String()
}

// The same seed prints the same bytes, from one process to the next; the
// progress goes to stderr, not into the report.
// TestDrillCommandText checks the command's report once: that a seed's
// report is the same on every run is drill's TestSameSeedSameBytes, on the
// Run and WriteText this command calls.
func TestDrillCommandText(t *testing.T) {
	first, progress := runDrill(t, "--seed", "7")
	for _, want := range []string{"seed 7", "deploy", "alert", "contain", "fix", "reenable",
		"p2  REJECTED: 3 of", "reconciliation after remediation: 0 unexplained", "n=300", "n=1000", "invariants hold"} {
		if !strings.Contains(first, want) {
			t.Errorf("the report lacks %q:\n%s", want, first)
		}
	}
	if !strings.Contains(progress, "simulated minute 180 of 180") || strings.Contains(first, "\r") {
		t.Errorf("progress belongs on stderr only; stderr:\n%q", progress)
	}
}

func TestDrillCommandJSON(t *testing.T) {
	out, _ := runDrill(t, "--seed", "7", "--json")
	var r struct {
		Seed     uint64 `json:"seed"`
		Policies []struct {
			Revision string `json:"revision"`
		} `json:"policies"`
		Invariants struct {
			Unexplained int `json:"unexplained_after_remediation"`
		} `json:"invariants"`
		Bounds []struct {
			N int `json:"n"`
		} `json:"upper_bounds"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("--json is not JSON: %v\n%s", err, out)
	}
	if r.Seed != 7 || len(r.Policies) != 3 || len(r.Bounds) != 3 || r.Bounds[1].N != 300 || r.Bounds[2].N != 1000 {
		t.Errorf("unexpected figures: %+v", r)
	}
}
