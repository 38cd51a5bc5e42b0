package demo

import (
	"context"
	"errors"
	"fmt"

	"github.com/countersign/countersign/bundles"
	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/policy"
)

// GateFailure is one pinned case a candidate bundle answered wrongly.
type GateFailure struct {
	Case     string      `json:"case"`
	Amount   money.Cents `json:"amount"`
	Expected string      `json:"expected"`
	Got      string      `json:"got"`
}

// GateRun is the gate's verdict on one bundle.
type GateRun struct {
	Bundle string `json:"bundle"`
	Label  string `json:"label"`
	Passed bool   `json:"passed"`
	// Cases is how many pinned cases ran; TestsPassed counts the bundle's
	// own Rego tests that passed.
	Cases        int           `json:"cases"`
	TestsPassed  int           `json:"tests_passed"`
	Failures     []GateFailure `json:"failures"`
	TestFailures []string      `json:"test_failures,omitempty"`
}

// Gate is section 4: the boundary cases of the limits in force run against the current
// bundle and against the candidate with the units mistake, and the
// candidate offered to a running sidecar.
type Gate struct {
	Runs []GateRun `json:"runs"`
	// Offered is the candidate activated through a running stack's release
	// service; Rejected says the gate refused it, and ActiveAfter is the
	// revision still in force afterwards.
	Offered     string `json:"offered"`
	Rejected    bool   `json:"rejected"`
	ActiveAfter string `json:"active_after"`
}

var gateBundles = []struct{ name, label string }{
	{"p1", "p1, the current bundle"},
	{"p2", "p2, limits written in dollars"},
}

// LoadBundle loads one of the embedded bundles (p1, p2, p3).
func LoadBundle(name string) (*policy.Bundle, error) {
	fsys, err := bundles.Open(name)
	if err != nil {
		return nil, err
	}
	return policy.LoadFS(fsys)
}

// RunGate checks p1 and p2 with policy.Check, as a sidecar with no bundle
// active would, then offers p2 to a stack in dir running p1. The table
// lists the boundary cases; p2's undeclared limit changes, which the gate
// also reports, are what make those cases run at p1's limits.
func RunGate(ctx context.Context, dir string) (Gate, error) {
	var out Gate
	reference, err := policy.BaselineLimits()
	if err != nil {
		return out, err
	}
	for _, gb := range gateBundles {
		b, err := LoadBundle(gb.name)
		if err != nil {
			return out, err
		}
		r, err := policy.Check(ctx, b, reference)
		if err != nil {
			return out, fmt.Errorf("gate on %s: %w", gb.name, err)
		}
		run := GateRun{Bundle: gb.name, Label: gb.label, Passed: r.Passed(), Cases: len(r.Cases),
			TestsPassed: r.TestsPassed, TestFailures: r.TestFailures, Failures: []GateFailure{}}
		for _, f := range r.FailedCases() {
			run.Failures = append(run.Failures, GateFailure{Case: f.Case, Amount: f.Amount, Expected: f.Expected, Got: f.Got})
		}
		out.Runs = append(out.Runs, run)
	}

	st, err := start(ctx, dir, setup{controls: Without()})
	if err != nil {
		return out, err
	}
	defer st.Close()
	p2, err := LoadBundle("p2")
	if err != nil {
		return out, err
	}
	out.Offered = "p2"
	_, err = st.Releases.ActivateBundle(ctx, p2, policy.Activation{By: "ops-ida"})
	var gateErr *policy.GateError
	switch {
	case errors.As(err, &gateErr):
		out.Rejected = true
	case err != nil:
		return out, fmt.Errorf("offer p2: %w", err)
	}
	out.ActiveAfter = st.Policy.Revision()
	return out, nil
}
