package policy

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/tester"

	"github.com/countersign/countersign/executor/money"
)

// testTimeout bounds each of a bundle's own Rego tests, so a candidate
// cannot hang the gate.
const testTimeout = 5 * time.Second

// Report is what the gate found in a candidate bundle.
type Report struct {
	Revision string `json:"revision"`
	Digest   string `json:"digest"`
	// Cases holds every pinned case in table order, passing or not.
	Cases []CaseResult `json:"cases"`
	// TestsPassed counts the bundle's own Rego tests that passed;
	// TestFailures names each one that failed, sorted.
	TestsPassed  int      `json:"tests_passed"`
	TestFailures []string `json:"test_failures,omitempty"`
}

// Failures returns the pinned cases that failed, in table order.
func (r Report) Failures() []CaseResult {
	var out []CaseResult
	for _, c := range r.Cases {
		if !c.Pass() {
			out = append(out, c)
		}
	}
	return out
}

// Passed reports whether the bundle may be activated.
func (r Report) Passed() bool {
	return len(r.Failures()) == 0 && len(r.TestFailures) == 0
}

// CaseResult is one pinned case run against a candidate. For call cases
// Expected and Got are decisions and the rules are set; for approver cases
// they are "allowed" or a refusal code.
type CaseResult struct {
	Case         string      `json:"case"`
	Amount       money.Cents `json:"amount"`
	Expected     string      `json:"expected"`
	Got          string      `json:"got"`
	ExpectedRule string      `json:"expected_rule,omitempty"`
	GotRule      string      `json:"got_rule,omitempty"`
	// Error is set when the bundle could not answer at all, which fails
	// the case.
	Error string `json:"error,omitempty"`
}

// Pass reports whether the bundle answered as the case expects.
func (c CaseResult) Pass() bool {
	return c.Error == "" && c.Expected == c.Got && c.ExpectedRule == c.GotRule
}

// Check runs the gate on a candidate: the bundle's own Rego tests, and the
// pinned boundary cases, which ship in this package and not in bundles so
// that no bundle can edit them away. The candidate's limits are whatever its
// data says, so a bundle that loosens a limit fails the pinned cases even if
// its own tests (which set their limits) still pass.
//
// A bundle that fails is reported, not returned as an error; the error is
// for a gate that could not run (a cancelled context).
func Check(ctx context.Context, b *Bundle) (Report, error) {
	r := Report{Revision: b.revision, Digest: b.digest}
	passed, failures, err := runRegoTests(ctx, b)
	if err != nil {
		return r, err
	}
	r.TestsPassed, r.TestFailures = passed, failures
	r.Cases = runPinned(ctx, b)
	return r, ctx.Err()
}

// runRegoTests runs the bundle's *_test.rego with OPA's tester in process,
// on a private parse of the bundle and a store of its own.
func runRegoTests(ctx context.Context, b *Bundle) (int, []string, error) {
	raw, err := readBundle(b.archive)
	if err != nil {
		return 0, nil, err
	}
	store := inmem.New()
	txn, err := store.NewTransaction(ctx, storage.WriteParams)
	if err != nil {
		return 0, nil, fmt.Errorf("policy: gate: %w", err)
	}
	defer store.Abort(ctx, txn)
	ch, err := tester.NewRunner().
		SetStore(store).
		SetBundles(map[string]*bundle.Bundle{"candidate": &raw}).
		SetDefaultRegoVersion(ast.RegoV1).
		RaiseBuiltinErrors(true).
		SetTimeout(testTimeout).
		RunTests(ctx, txn)
	if err != nil {
		// Tests that do not compile are a failed gate, not a broken one.
		return 0, []string{"tests do not compile: " + err.Error()}, ctx.Err()
	}
	var passed int
	var failures []string
	for res := range ch {
		switch {
		case res.Skip:
		case res.Pass():
			passed++
		case res.Error != nil:
			failures = append(failures, fmt.Sprintf("%s.%s: %v", res.Package, res.Name, res.Error))
		default:
			failures = append(failures, fmt.Sprintf("%s.%s: FAIL", res.Package, res.Name))
		}
	}
	slices.Sort(failures)
	return passed, failures, ctx.Err()
}

// gateTime is the evaluation time of the pinned cases: fixed, so a case
// answers the same on every run. The approver cases carry their own times.
var gateTime = time.Unix(1_700_000_000, 0).UTC()

func runPinned(ctx context.Context, b *Bundle) []CaseResult {
	out := make([]CaseResult, 0, len(callCases)+len(approverCases))
	for _, c := range callCases {
		r := CaseResult{Case: c.name, Amount: c.amount, Expected: string(c.want), ExpectedRule: c.rule}
		got, err := b.decide(ctx, c.input(), gateTime)
		if err != nil {
			r.Error = err.Error()
		}
		r.Got, r.GotRule = string(got.Decision), got.Rule
		out = append(out, r)
	}
	for _, c := range approverCases {
		r := CaseResult{Case: c.name, Amount: c.in.Amount, Expected: verdict(c.want)}
		got, err := b.checkApprover(ctx, c.in, gateTime)
		if err != nil {
			r.Error = err.Error()
		} else {
			r.Got = verdict(got)
		}
		out = append(out, r)
	}
	return out
}

func verdict(r Refusal) string {
	if r == "" {
		return "allowed"
	}
	return string(r)
}
