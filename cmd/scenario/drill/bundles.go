package drill

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/countersign/countersign/bundles"
	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/policy"
)

// The drill's caps, written into each bundle's data in place of the
// company's $1,000 per rep per day and $3,000 per hour.
const (
	drillRepDaily    money.Cents = 500000
	drillAgentHourly money.Cents = 1000000
)

// capRules are the rules of the pinned cases that probe the caps: the only
// cases a bundle with the drill's caps may fail for that reason.
var capRules = map[string]bool{"R5-rep-daily-cap": true, "R6-agent-hourly-cap": true}

// GateCase is one pinned case a bundle failed.
type GateCase struct {
	Case     string      `json:"case"`
	Amount   money.Cents `json:"amount"`
	Expected string      `json:"expected"`
	Got      string      `json:"got"`
}

// GateVerdict is the gate's answer on one embedded bundle as shipped, and
// on the drill's copy of it.
type GateVerdict struct {
	Revision string `json:"revision"`
	Passed   bool   `json:"passed"`
	// Cases is how many pinned cases ran; Tests how many of the bundle's
	// own Rego tests passed.
	Cases        int        `json:"cases"`
	Tests        int        `json:"tests_passed"`
	Failures     []GateCase `json:"failures"`
	TestFailures []string   `json:"test_failures,omitempty"`
	// CopyFailures are the failures of the drill's copy that are not
	// failures of the bundle as shipped: the cap cases, and nothing else.
	CopyFailures []GateCase `json:"copy_failures"`
}

// drillBundle writes the embedded bundle name under dir with the drill's
// caps in its data.json and loads it. Its revision stays the embedded one.
func drillBundle(dir, name string) (*policy.Bundle, error) {
	src, err := bundles.Open(name)
	if err != nil {
		return nil, fmt.Errorf("drill: bundle %s: %w", name, err)
	}
	dst := filepath.Join(dir, name)
	if err := os.CopyFS(dst, src); err != nil {
		return nil, fmt.Errorf("drill: copy bundle %s: %w", name, err)
	}
	path := filepath.Join(dst, "data.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("drill: bundle %s: %w", name, err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var data map[string]any
	if err := dec.Decode(&data); err != nil {
		return nil, fmt.Errorf("drill: bundle %s data.json: %w", name, err)
	}
	cs, _ := data["countersign"].(map[string]any)
	limits, ok := cs["limits"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("drill: bundle %s has no data.countersign.limits", name)
	}
	limits["rep_daily"] = int64(drillRepDaily)
	limits["agent_hourly"] = int64(drillAgentHourly)
	out, err := json.MarshalIndent(data, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, append(out, '\n'), 0o644); err != nil {
		return nil, err
	}
	return policy.LoadDir(dst)
}

// embedded loads a bundle as shipped.
func embedded(name string) (*policy.Bundle, error) {
	fsys, err := bundles.Open(name)
	if err != nil {
		return nil, fmt.Errorf("drill: bundle %s: %w", name, err)
	}
	return policy.LoadFS(fsys)
}

// gate runs the gate on the bundle as shipped and on the drill's copy, and
// checks that the copy fails nothing the shipped bundle does not, except
// the cap cases.
// Both are checked as by a sidecar with no bundle active, against p1's
// limits: the copy's raised caps are undeclared changes, so its boundary
// cases run at p1's caps. Only the cases are compared.
func gate(ctx context.Context, shipped, copy *policy.Bundle) (GateVerdict, error) {
	reference, err := policy.BaselineLimits()
	if err != nil {
		return GateVerdict{}, err
	}
	r, err := policy.Check(ctx, shipped, reference)
	if err != nil {
		return GateVerdict{}, fmt.Errorf("drill: gate %s: %w", shipped.Revision(), err)
	}
	v := GateVerdict{
		Revision: shipped.Revision(), Passed: r.Passed(), Cases: len(r.Cases), Tests: r.TestsPassed,
		Failures: []GateCase{}, TestFailures: r.TestFailures, CopyFailures: []GateCase{},
	}
	failed := map[string]bool{}
	for _, f := range r.FailedCases() {
		v.Failures = append(v.Failures, GateCase{Case: f.Case, Amount: f.Amount, Expected: f.Expected, Got: f.Got})
		failed[f.Case] = true
	}
	rc, err := policy.Check(ctx, copy, reference)
	if err != nil {
		return GateVerdict{}, fmt.Errorf("drill: gate the drill's %s: %w", copy.Revision(), err)
	}
	if len(rc.TestFailures) != len(r.TestFailures) {
		return GateVerdict{}, fmt.Errorf("drill: the drill's %s fails Rego tests the shipped one passes: %v", copy.Revision(), rc.TestFailures)
	}
	for _, f := range rc.FailedCases() {
		if failed[f.Case] {
			continue
		}
		if !capRules[f.ExpectedRule] {
			return GateVerdict{}, fmt.Errorf("drill: the drill's %s fails pinned case %q, which is not a cap case", copy.Revision(), f.Case)
		}
		v.CopyFailures = append(v.CopyFailures, GateCase{Case: f.Case, Amount: f.Amount, Expected: f.Expected, Got: f.Got})
	}
	return v, nil
}
