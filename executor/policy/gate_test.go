package policy_test

import (
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/policy"
)

type failure struct {
	kase     string
	amount   money.Cents
	expected string
	got      string
}

func failures(r policy.Report) []failure {
	var out []failure
	for _, f := range r.Failures() {
		out = append(out, failure{f.Case, f.Amount, f.Expected, f.Got})
	}
	return out
}

func TestCheckEmbeddedReleases(t *testing.T) {
	tests := []struct {
		bundle string
		want   []failure
	}{
		{bundle: "p1"},
		// The units mistake: both changes undeclared, so the boundary
		// cases run at p1's limits and p2 fails exactly the seed's three.
		{bundle: "p2", want: []failure{
			{policy.LimitChangeUndeclared, 0, "refund_auto 5000", "refund_auto 500000 (undeclared)"},
			{policy.LimitChangeUndeclared, 0, "refund_max 50000", "refund_max 5000000 (undeclared)"},
			{"refund above the auto limit", 5100, "REQUIRE_APPROVAL", "ALLOW"},
			{"refund at the maximum", 50000, "REQUIRE_APPROVAL", "ALLOW"},
			{"refund above the maximum", 50100, "DENY", "ALLOW"},
		}},
		{bundle: "p3"},
	}
	for _, tt := range tests {
		t.Run(tt.bundle, func(t *testing.T) {
			r, err := policy.Check(ctx, embedded(t, tt.bundle), baseline(t))
			if err != nil {
				t.Fatal(err)
			}
			if len(r.TestFailures) != 0 || r.TestsPassed == 0 {
				t.Errorf("own Rego tests: %d passed, failures %v", r.TestsPassed, r.TestFailures)
			}
			if got := failures(r); !slices.Equal(got, tt.want) {
				t.Errorf("failures\n got %+v\nwant %+v", got, tt.want)
			}
			if r.Passed() != (len(tt.want) == 0) || r.Revision != tt.bundle {
				t.Errorf("Passed() = %v, revision %q", r.Passed(), r.Revision)
			}
			if r.Limits != baseline(t) {
				t.Errorf("limits in force %+v, want p1's", r.Limits)
			}
		})
	}
}

// sourceBundle builds a bundle from rego/ with p1's limits but those in
// set, declaring changes; the error is LoadFS's.
func sourceBundle(t *testing.T, revision string, set map[string]int64, changes ...policy.LimitChange) (*policy.Bundle, error) {
	t.Helper()
	var limits map[string]int64
	if err := json.Unmarshal([]byte(p1LimitsObject), &limits); err != nil {
		t.Fatal(err)
	}
	maps.Copy(limits, set)
	data, err := json.Marshal(map[string]any{"countersign": map[string]any{"limits": limits}})
	if err != nil {
		t.Fatal(err)
	}
	fsys, err := policy.Source(os.DirFS(filepath.Join("..", "..", "rego")), data, revision, changes)
	if err != nil {
		t.Fatal(err)
	}
	return policy.LoadFS(fsys)
}

func mustSource(t *testing.T, revision string, set map[string]int64, changes ...policy.LimitChange) *policy.Bundle {
	t.Helper()
	b, err := sourceBundle(t, revision, set, changes...)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A declared change moves the boundary cases with it: $50 to $75 passes,
// its cases at $74, $75 and $76, and is reported as loosening.
func TestDeclaredLimitChangePasses(t *testing.T) {
	raise := policy.LimitChange{Name: "refund_auto", From: 5000, To: 7500}
	b := mustSource(t, "p4", map[string]int64{"refund_auto": 7500}, raise)
	r, err := policy.Check(ctx, b, baseline(t))
	if err != nil {
		t.Fatal(err)
	}
	if !r.Passed() {
		t.Fatalf("failures %+v, tests %v", r.Failures(), r.TestFailures)
	}
	if r.Limits.RefundAuto != 7500 || !slices.Equal(r.Changes, []policy.LimitChange{raise}) || !slices.Equal(r.Loosens(), []policy.LimitChange{raise}) {
		t.Errorf("limits in force %+v, changes %v, loosens %v", r.Limits, r.Changes, r.Loosens())
	}
	amounts := map[string]money.Cents{}
	for _, c := range r.Cases {
		amounts[c.Case] = c.Amount
	}
	for name, want := range map[string]money.Cents{"refund under the auto limit": 7400, "refund at the auto limit": 7500, "refund above the auto limit": 7600} {
		if amounts[name] != want {
			t.Errorf("%q ran at %s, want %s", name, amounts[name], want)
		}
	}
	out, err := json.Marshal(r)
	if err != nil || !strings.Contains(string(out), `"limits":{"refund_auto":7500,"refund_max":50000,`) {
		t.Errorf("report JSON: %v\n%s", err, out)
	}
}

// A change that is not declared, or declared from another value, fails
// the gate naming the limit, and the boundary cases run at the
// reference's limits.
func TestLimitChangeMustBeDeclared(t *testing.T) {
	tests := []struct {
		name    string
		set     map[string]int64
		changes []policy.LimitChange
		want    policy.CaseResult // the one limit failure
	}{
		{"a tightening left undeclared", map[string]int64{"reship_approval_value": 20000}, nil,
			policy.CaseResult{Expected: "reship_approval_value 30000", Got: "reship_approval_value 20000 (undeclared)"}},
		{"a raise declared from the wrong value", map[string]int64{"refund_auto": 7500},
			[]policy.LimitChange{{Name: "refund_auto", From: 4000, To: 7500}},
			policy.CaseResult{Expected: "refund_auto 5000", Got: "refund_auto 7500 (declared from 4000)"}},
		{"a declared change that the reference already has", map[string]int64{"rep_daily": 100000},
			[]policy.LimitChange{{Name: "rep_daily", From: 90000, To: 100000}},
			policy.CaseResult{Expected: "rep_daily 100000", Got: "rep_daily 100000 (declared from 90000)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := policy.Check(ctx, mustSource(t, "p4", tt.set, tt.changes...), baseline(t))
			if err != nil {
				t.Fatal(err)
			}
			tt.want.Case = policy.LimitChangeUndeclared
			if r.Passed() || !slices.Equal(r.LimitFailures, []policy.CaseResult{tt.want}) {
				t.Errorf("limit failures %+v, want %+v", r.LimitFailures, tt.want)
			}
			if r.Limits != baseline(t) {
				t.Errorf("cases ran at %+v, want the reference's limits", r.Limits)
			}
		})
	}
}

// The engine compares a candidate with the active bundle: after a raise
// to $75, p3's $50 is a change to declare, and a bundle declaring it
// passes.
func TestActivateComparesWithTheActiveBundle(t *testing.T) {
	e := activeEngine(t, "p1", policy.Options{})
	if _, err := e.Activate(ctx, mustSource(t, "p4", map[string]int64{"refund_auto": 7500},
		policy.LimitChange{Name: "refund_auto", From: 5000, To: 7500}), policy.Activation{By: "ops-jon", Proposer: "ops-ida"}); err != nil {
		t.Fatal(err)
	}
	r, err := e.Activate(ctx, embedded(t, "p3"), policy.Activation{By: "ops-ida"})
	if !errors.Is(err, policy.ErrGateFailed) || len(r.LimitFailures) != 1 || r.LimitFailures[0].Expected != "refund_auto 7500" {
		t.Fatalf("p3 after p4: %v, limit failures %+v", err, r.LimitFailures)
	}
	lower := policy.LimitChange{Name: "refund_auto", From: 7500, To: 5000}
	r, err = e.Activate(ctx, mustSource(t, "p5", nil, lower), policy.Activation{By: "ops-ida"})
	if err != nil || e.Revision() != "p5" || len(r.Loosens()) != 0 {
		t.Errorf("p5 declaring %v: %v, active %s, loosens %v", lower, err, e.Revision(), r.Loosens())
	}
}

// A declaration that cannot be right whatever is active is refused when
// the bundle loads.
func TestLimitChangeDeclarationsChecked(t *testing.T) {
	tests := []struct {
		name    string
		changes []policy.LimitChange
		say     string
	}{
		{"unknown limit", []policy.LimitChange{{Name: "refund_cap", From: 1, To: 2}}, `"refund_cap" is not a limit`},
		{"to is not the bundle's value", []policy.LimitChange{{Name: "refund_auto", From: 5000, To: 8000}}, "holds 5000"},
		{"no change", []policy.LimitChange{{Name: "refund_auto", From: 5000, To: 5000}}, "declares no change"},
		{"declared twice", []policy.LimitChange{{Name: "refund_max", From: 40000, To: 50000}, {Name: "refund_max", From: 40000, To: 50000}}, "declared twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := sourceBundle(t, "p4", nil, tt.changes...)
			if !errors.Is(err, policy.ErrInvalidBundle) || !strings.Contains(err.Error(), tt.say) {
				t.Errorf("load: %v, want ErrInvalidBundle saying %q", err, tt.say)
			}
		})
	}
	t.Run("not a list of changes", func(t *testing.T) {
		fsys := customFS(t, "p4", regoSource(t, "call/call.rego"), p1Limits, nil)
		fsys[".manifest"].Data = []byte(`{"revision": "p4", "roots": ["countersign"], "rego_version": 1,
			"metadata": {"limit_changes": [{"name": "refund_auto", "from": "5000", "to": 7500}]}}`)
		if _, err := policy.LoadFS(fsys); !errors.Is(err, policy.ErrInvalidBundle) || !strings.Contains(err.Error(), "limit_changes") {
			t.Errorf("load: %v, want ErrInvalidBundle about limit_changes", err)
		}
	})
}

func TestLoosens(t *testing.T) {
	tests := []struct {
		change policy.LimitChange
		want   bool
	}{
		{policy.LimitChange{Name: "refund_auto", From: 5000, To: 7500}, true},
		{policy.LimitChange{Name: "refund_max", From: 50000, To: 40000}, false},
		{policy.LimitChange{Name: "reship_approval_value", From: 30000, To: 30001}, true},
		{policy.LimitChange{Name: "rep_daily", From: 100000, To: 200000}, true},
		{policy.LimitChange{Name: "agent_hourly", From: 300000, To: 100000}, false},
		{policy.LimitChange{Name: "approval_ttl_seconds", From: 900, To: 1800}, true},
		{policy.LimitChange{Name: "token_ttl_seconds", From: 60, To: 30}, false},
		// The same cap over a shorter window lets more through.
		{policy.LimitChange{Name: "rep_window_seconds", From: 86400, To: 3600}, true},
		{policy.LimitChange{Name: "rep_window_seconds", From: 86400, To: 172800}, false},
		{policy.LimitChange{Name: "rep_window_seconds", From: 86400, To: 86400}, false},
		{policy.LimitChange{Name: "refund_cap", From: 1, To: 2}, false},
	}
	for _, tt := range tests {
		if got := tt.change.Loosens(); got != tt.want {
			t.Errorf("%v loosens: %v, want %v", tt.change, got, tt.want)
		}
	}
}

// The invariant cases hold for any limits: a bundle that lets a mistyped
// amount through fails the gate on that case, whatever its own tests say.
func TestInvariantMistypedAmount(t *testing.T) {
	leaky := p1Variant(t, "leaky", func(src string) string {
		return strings.Replace(src, "decision := deny(\"R0-unknown-user\") if {",
			"decision := allow if {\n\tis_string(input.args.amount)\n} else := deny(\"R0-unknown-user\") if {", 1)
	}, nil)
	r, err := policy.Check(ctx, leaky, baseline(t))
	if err != nil {
		t.Fatal(err)
	}
	var failed []string
	for _, f := range r.Failures() {
		failed = append(failed, f.Case+": "+f.Expected+" got "+f.Got)
	}
	if want := []string{"refund with the amount as a string: DENY got ALLOW"}; !slices.Equal(failed, want) {
		t.Errorf("failures %q, want %q", failed, want)
	}
}

// Two candidates declaring changes from the same active bundle race: the
// engine gates one at a time, so the second is compared with the first,
// which it does not declare, and only one activates.
func TestConcurrentActivationsCompareWithWhatTheyReplace(t *testing.T) {
	e := activeEngine(t, "p1", policy.Options{})
	candidates := []*policy.Bundle{
		mustSource(t, "p4", map[string]int64{"refund_auto": 7500}, policy.LimitChange{Name: "refund_auto", From: 5000, To: 7500}),
		mustSource(t, "p5", map[string]int64{"refund_auto": 6000}, policy.LimitChange{Name: "refund_auto", From: 5000, To: 6000}),
	}
	errs := make([]error, len(candidates))
	var wg sync.WaitGroup
	for i, b := range candidates {
		wg.Go(func() { _, errs[i] = e.Activate(ctx, b, policy.Activation{By: "ops-jon", Proposer: "ops-ida"}) })
	}
	wg.Wait()
	if (errs[0] == nil) == (errs[1] == nil) || !errors.Is(errors.Join(errs...), policy.ErrGateFailed) {
		t.Errorf("activations: %v; want one active and one refused by the gate", errs)
	}
}

// The gate's cases are decided at one fixed time, which their inputs carry
// as now, with orders placed and shipped before it: a bundle whose rules
// read the time answers them the same on every run.
func TestCasesCarryAFixedNow(t *testing.T) {
	const now = `"now":{"ns":1700000000000000000,"rfc3339":"2023-11-14T22:13:20Z"}`
	const dated = `"placed_at":"2023-11-04T22:13:20Z"`
	for _, in := range policy.CaseInputs(baseline(t)) {
		doc, err := policy.InputJSON(in)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(doc), now) || !strings.Contains(string(doc), dated) {
			t.Errorf("case input %s lacks %s or %s", doc, now, dated)
		}
	}
}
