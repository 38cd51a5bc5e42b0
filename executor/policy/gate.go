package policy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/tester"

	"github.com/countersign/countersign/executor/money"
)

// Deadlines of the gate's run of a bundle's own Rego tests, so that a
// candidate cannot hang the gate. A test may legitimately take longer than
// one decision (Options.Timeout): it may check a table of dozens of
// decisions in one `every`, and the tester compiles as it goes. The shipped
// tests take under 10 ms each, but under the race detector on a loaded
// 2-core machine one took over a second, failing a sound bundle; five
// seconds each judges the bundle, not the host. testsBudget bounds them all
// together: tests run two or so at a time, and without it a bundle of many
// slow tests would hold the upload for minutes.
const (
	testTimeout = 5 * time.Second
	testsBudget = 60 * time.Second
)

// gate is how a candidate is checked: the built-ins its tests may call and
// the deadlines, as the engine that activates it has them (Options).
type gate struct {
	timeout      time.Duration // of a decision in production
	unrestricted bool
}

// caseTimeout is the deadline of one gate case: the production deadline,
// but never under testTimeout. The gate judges the bundle, not the load of
// the machine at upload time: at 100 ms a busy host (a CI runner, a start-up
// beside other work) once failed a case of a sound bundle, which also stops
// a dev stack from starting. A bundle that loops is caught either way; one
// merely slower than production's deadline passes and fails closed live.
func (g gate) caseTimeout() time.Duration { return max(g.timeout, testTimeout) }

func defaultGate() gate { return gate{timeout: DefaultTimeout} }

func (g gate) capabilities() *ast.Capabilities {
	if g.unrestricted {
		return allCapabilities()
	}
	return Capabilities()
}

// admit refuses a bundle whose production rules call a forbidden built-in.
func (g gate) admit(b *Bundle) error {
	if b.forbidden != nil && !g.unrestricted {
		return b.forbidden
	}
	return nil
}

// refused reports whether a gate error is a refusal of the candidate (to
// record as rejected) rather than a gate that could not run.
func refused(err error) bool {
	return errors.Is(err, ErrForbiddenBuiltin) || errors.Is(err, ErrNoTests)
}

// refusalCase is a refusal as the one failure of a history record.
func refusalCase(err error) CaseResult {
	var fe *ForbiddenBuiltinError
	switch {
	case errors.As(err, &fe):
		return CaseResult{Case: fmt.Sprintf("forbidden built-in %s in %s:%d", fe.Builtin, fe.File, fe.Row),
			Expected: "allowed built-ins only", Got: fe.Builtin, Error: err.Error()}
	case errors.Is(err, ErrNoTests):
		return CaseResult{Case: "bundle without Rego tests", Expected: "at least one test", Got: "none", Error: err.Error()}
	}
	return CaseResult{Case: "refused", Error: err.Error()}
}

// Report is what the gate found in a candidate bundle.
type Report struct {
	Revision string `json:"revision"`
	Digest   string `json:"digest"`
	// Limits are the limits in force, at which the boundary cases ran:
	// the candidate's own when it declares every change from the
	// reference, otherwise the reference's.
	Limits Limits `json:"limits"`
	// Changes are the limit changes the candidate declares in its
	// .manifest (see LimitChange), correct or not.
	Changes []LimitChange `json:"limit_changes,omitempty"`
	// LimitFailures holds one LimitChangeUndeclared failure per limit
	// that differs from the reference without a matching declaration.
	LimitFailures []CaseResult `json:"limit_failures,omitempty"`
	// Cases holds every case in table order, passing or not.
	Cases []CaseResult `json:"cases"`
	// TestsPassed counts the bundle's own Rego tests that passed;
	// TestFailures names each one that failed, sorted.
	TestsPassed  int      `json:"tests_passed"`
	TestFailures []string `json:"test_failures,omitempty"`
}

// Failures returns the limit failures, then the failed cases.
func (r Report) Failures() []CaseResult {
	return append(slices.Clone(r.LimitFailures), r.FailedCases()...)
}

// FailedCases returns the cases that failed, in table order.
func (r Report) FailedCases() []CaseResult {
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

// Loosens returns the declared limit changes that loosen a limit (see
// LimitChange.Loosens), in the order declared: what a second person
// should look at before the bundle is activated.
func (r Report) Loosens() []LimitChange {
	var out []LimitChange
	for _, c := range r.Changes {
		if c.Loosens() {
			out = append(out, c)
		}
	}
	return out
}

// CaseResult is one case run against a candidate. For call cases Expected
// and Got are decisions and the rules are set; for approver cases they are
// "allowed" or a refusal code; for a LimitChangeUndeclared failure they
// are the limit at the reference's value and at the candidate's.
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

// Check runs the gate on a candidate against the reference limits: those
// of the active bundle, or BaselineLimits when none is active. It runs the
// bundle's own Rego tests and the case suite of cases.go, which ships in
// this package and not in bundles so that no bundle can edit it away.
//
// Every limit of the candidate that differs from the reference must be
// declared (see LimitChange); each that is not fails the gate as a
// LimitChangeUndeclared, and the boundary cases then run at the reference
// limits, so a bundle that loosens a limit unannounced fails them too,
// even if its own tests (which set their limits) pass. When every change
// is declared the cases run at the candidate's limits. A reference known
// by its limits sets no bounds and no breaker, as the released bundles do;
// CheckAgainst compares those too.
//
// A bundle that fails is reported, not returned as an error. The error is
// a refusal (*ForbiddenBuiltinError, ErrNoTests: the bundle cannot be
// judged by its tests at all) or a gate that could not run (a cancelled
// context). Check runs as an engine with default Options does.
func Check(ctx context.Context, b *Bundle, limits Limits) (Report, error) {
	return defaultGate().check(ctx, b, reference{limits: limits, figures: limitFigures(limits)}, b.changes)
}

// CheckAgainst is Check with a reference bundle: its limits, and the
// bounds and breaker thresholds it sets, which a candidate that sets them
// too must declare a change of in the same way.
func CheckAgainst(ctx context.Context, b, ref *Bundle) (Report, error) {
	return defaultGate().check(ctx, b, referenceFrom(ref), b.changes)
}

// reference is what the gate compares a candidate with: the limits the
// boundary cases fall back to, and the figures the candidate's must equal
// or declare a change from.
type reference struct {
	limits  Limits
	figures figures
}

func referenceFrom(b *Bundle) reference { return reference{limits: b.limits, figures: b.figures} }

// check runs the gate with the limit changes declared (the bundle's own,
// or every difference for a rollback).
func (g gate) check(ctx context.Context, b *Bundle, ref reference, declared []LimitChange) (Report, error) {
	r := Report{Revision: b.revision, Digest: b.digest, Changes: declared}
	if err := g.admit(b); err != nil {
		return r, err
	}
	passed, failures, err := g.runRegoTests(ctx, b)
	if err != nil {
		return r, err
	}
	r.TestsPassed, r.TestFailures = passed, failures
	r.LimitFailures = limitFailures(ref.figures, b.figures, declared)
	r.Limits = b.limits
	if len(r.LimitFailures) > 0 {
		r.Limits = ref.limits
	}
	r.Cases = g.runCases(ctx, b, r.Limits)
	return r, ctx.Err()
}

// runRegoTests runs the bundle's *_test.rego with OPA's tester in process,
// on a private parse of the bundle and a store of its own, compiled under
// the same capabilities as production: the tester has no setter for them,
// so it gets a compiler that carries them (and the Rego version, which
// SetDefaultRegoVersion no longer sets once a compiler is given).
func (g gate) runRegoTests(ctx context.Context, b *Bundle) (int, []string, error) {
	key := testRun{digest: b.digest, unrestricted: g.unrestricted}
	if passed, ok := testRuns.get(key); ok {
		return passed, nil, nil
	}
	passed, failures, err := g.runRegoTestsOnce(ctx, b)
	if err == nil && len(failures) == 0 {
		testRuns.put(key, passed)
	}
	return passed, failures, err
}

// testRuns remembers, by archive digest and capabilities, the bundles whose
// Rego tests all passed in this process. The tests are deterministic
// (time.now_ns and the network are forbidden built-ins, the tester gets a
// store of its own), so a bundle gated again (a rollback, a restarted stack
// in a test or the demo, a second sidecar of a fleet in one process) passes
// again without running them. A run with a failure is not remembered: a
// test that ran out of time judged the machine's load, not the bundle.
var testRuns = testMemo{m: map[testRun]int{}}

type testRun struct {
	digest       string
	unrestricted bool
}

// testMemo maps a run to its count of passed tests. It forgets everything
// when full, which bounds it at maxTestRuns entries.
type testMemo struct {
	mu sync.Mutex
	m  map[testRun]int
}

const maxTestRuns = 256

func (t *testMemo) get(k testRun) (int, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n, ok := t.m[k]
	return n, ok
}

func (t *testMemo) put(k testRun, passed int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.m) >= maxTestRuns {
		clear(t.m)
	}
	t.m[k] = passed
}

func (g gate) runRegoTestsOnce(ctx context.Context, b *Bundle) (int, []string, error) {
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
	budget, cancel := context.WithTimeout(ctx, testsBudget)
	defer cancel()
	ch, err := tester.NewRunner().
		SetCompiler(newCompiler(g.capabilities())).
		SetStore(store).
		SetBundles(map[string]*bundle.Bundle{"candidate": &raw}).
		RaiseBuiltinErrors(true).
		SetTimeout(testTimeout).
		RunTests(budget, txn)
	if err != nil {
		var errs ast.Errors
		if errors.As(err, &errs) {
			if fe := forbiddenIn(errs); fe != nil {
				return 0, nil, fe
			}
		}
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
	if budget.Err() != nil && ctx.Err() == nil {
		failures = append(failures, fmt.Sprintf("rego tests: stopped after %v, the gate's budget for all of them", testsBudget))
	}
	if passed+len(failures) == 0 {
		return 0, nil, fmt.Errorf("%w: revision %s; add *_test.rego files with test_ rules that pin its decisions", ErrNoTests, b.revision)
	}
	slices.Sort(failures)
	return passed, failures, ctx.Err()
}

// gateTime is the evaluation time of the cases and the now their inputs
// carry: fixed, so a case answers the same on every run. The approver
// cases carry their own times.
var gateTime = time.Unix(1_700_000_000, 0).UTC()

// runCases answers every case, derived from the limits in force and the
// bundle's own, under caseTimeout. A case that times out fails, with Got
// "timeout".
func (g gate) runCases(ctx context.Context, b *Bundle, inForce Limits) []CaseResult {
	calls, approvals := callCases(inForce, b.limits), approverCases(inForce)
	out := make([]CaseResult, 0, len(calls)+len(approvals))
	for _, c := range calls {
		r := CaseResult{Case: c.name, Amount: c.amount, Expected: string(c.want), ExpectedRule: c.rule}
		got, err := b.decideValue(ctx, c.input, gateTime, g.caseTimeout())
		r.Got, r.GotRule = string(got.Decision), got.Rule
		out = append(out, withError(r, err))
	}
	for _, c := range approvals {
		r := CaseResult{Case: c.name, Amount: c.in.Amount, Expected: verdict(c.want)}
		got, err := b.checkApprover(ctx, c.in, gateTime, g.caseTimeout())
		if err == nil {
			r.Got = verdict(got)
		}
		out = append(out, withError(r, err))
	}
	return out
}

func withError(r CaseResult, err error) CaseResult {
	if err != nil {
		r.Error = err.Error()
	}
	if errors.Is(err, ErrTimeout) {
		r.Got = "timeout"
	}
	return r
}

func verdict(r Refusal) string {
	if r == "" {
		return "allowed"
	}
	return string(r)
}
