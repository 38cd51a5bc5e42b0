package policy_test

import (
	"encoding/json"
	"errors"
	"maps"
	"strconv"
	"strings"
	"testing"

	"github.com/countersign/countersign/bundles/loosen"
	"github.com/countersign/countersign/executor/policy"
)

// p1Data is p1's data.json with the limits in set changed and the members
// of more (JSON object members, e.g. `"bounds": {...}`) added beside the
// limits.
func p1Data(t testing.TB, set map[string]int64, more string) string {
	t.Helper()
	limits := map[string]int64{}
	if err := json.Unmarshal([]byte(p1LimitsObject), &limits); err != nil {
		t.Fatal(err)
	}
	maps.Copy(limits, set)
	b, err := json.Marshal(limits)
	if err != nil {
		t.Fatal(err)
	}
	if more != "" {
		more = ", " + more
	}
	return `{"countersign": {"limits": ` + string(b) + more + `}}`
}

// p1With is p1's rules (call.rego through edit, nil for none) under
// revision, with data as its data.json and its .manifest declaring
// changes.
func p1With(t testing.TB, revision string, edit func(string) string, data string, changes ...policy.LimitChange) *policy.Bundle {
	t.Helper()
	manifest := map[string]any{"revision": revision, "roots": []string{"countersign"}, "rego_version": 1}
	if len(changes) > 0 {
		manifest["metadata"] = map[string]any{"limit_changes": changes}
	}
	m, err := json.Marshal(manifest)
	if err != nil {
		t.Fatal(err)
	}
	if edit == nil {
		edit = func(s string) string { return s }
	}
	return p1Variant(t, revision, edit, map[string]string{".manifest": string(m), "data.json": data})
}

// A bundle that loosens a limit waits for a second operator: recorded as
// awaiting, the active bundle unchanged; the proposer cannot approve it;
// another operator activates it, and the record names both.
func TestLooseningNeedsASecondOperator(t *testing.T) {
	h := &policy.MemHistory{}
	e := activeEngine(t, "p1", policy.Options{History: h})
	p4 := p1With(t, "p4", nil, p1Data(t, map[string]int64{"refund_auto": 7500}, ""), policy.LimitChange{Name: "refund_auto", From: 5000, To: 7500})

	_, err := e.Activate(ctx, p4, policy.Activation{By: "ops-ida"})
	var aw *policy.AwaitingError
	if !errors.As(err, &aw) || aw.Digest != p4.Digest() || len(aw.Loosens) != 1 || e.Revision() != "p1" {
		t.Fatalf("loosening upload: %v; active %s", err, e.Revision())
	}
	if want := "data.countersign.limits.refund_auto 5000 → 7500 loosens refund_auto"; len(aw.Reasons) != 1 || aw.Reasons[0] != want {
		t.Errorf("reasons %q, want [%q]", aw.Reasons, want)
	}
	if last := h.Records()[len(h.Records())-1]; last.Status != policy.StatusAwaitingSecondOperator || last.By != "ops-ida" {
		t.Errorf("record %+v, want awaiting_second_operator by ops-ida", last)
	}
	if _, err := e.Activate(ctx, p4, policy.Activation{By: "ops-ida", Proposer: "ops-ida"}); !errors.Is(err, policy.ErrSameOperator) || e.Revision() != "p1" {
		t.Fatalf("approved by its proposer: %v; active %s", err, e.Revision())
	}
	if _, err := e.Activate(ctx, p4, policy.Activation{By: "ops-jon", Proposer: "ops-ida"}); err != nil || e.Revision() != "p4" {
		t.Fatalf("approved by another operator: %v; active %s", err, e.Revision())
	}
	if last := h.Records()[len(h.Records())-1]; last.Status != policy.StatusActive || last.By != "ops-jon" || last.Proposer != "ops-ida" {
		t.Errorf("record %+v, want active by ops-jon proposed by ops-ida", last)
	}

	// Back to p3 by rollback: the same rules, and the request declares
	// p3's limits, a tightening, so it activates at once.
	if _, err := e.Activate(ctx, embedded(t, "p3"), policy.Activation{By: "ops-ida", Rollback: true}); err != nil || e.Revision() != "p3" {
		t.Fatalf("rollback to p3: %v; active %s", err, e.Revision())
	}
	// And forth to p4 by rollback: a loosening, so it waits again.
	if _, err := e.Activate(ctx, p4, policy.Activation{By: "ops-ida", Rollback: true}); !errors.As(err, &aw) || e.Revision() != "p3" {
		t.Fatalf("rollback to p4: %v; active %s", err, e.Revision())
	}
}

// Break-glass needs a second operator too, and its record keeps the gate's
// failures it overrode.
func TestBreakGlassNeedsASecondOperator(t *testing.T) {
	h := &policy.MemHistory{}
	e := activeEngine(t, "p1", policy.Options{History: h})
	p2 := embedded(t, "p2")
	var aw *policy.AwaitingError
	if _, err := e.Activate(ctx, p2, policy.Activation{By: "ops-ida", BreakGlass: true, Reason: "drill"}); !errors.As(err, &aw) || !aw.BreakGlass || e.Revision() != "p1" {
		t.Fatalf("break glass by one operator: %v; active %s", err, e.Revision())
	}
	if _, err := e.Activate(ctx, p2, policy.Activation{By: "ops-jon", Proposer: "ops-ida", BreakGlass: true, Reason: "drill"}); err != nil || e.Revision() != "p2" {
		t.Fatalf("break glass by two: %v; active %s", err, e.Revision())
	}
	last := h.Records()[len(h.Records())-1]
	if len(last.Failures) != 5 { // two undeclared limits and p2's three boundary cases
		t.Errorf("break-glass record failures %+v, want the five the gate found", last.Failures)
	}
}

// Only a pure tightening of the active bundle goes live on one operator:
// the same rules (as parsed: layout and comments do not count, tests may
// differ), the same data keys, and every value that changes a limit moved
// the tightening way. Everything else waits for a second operator, with
// the reasons.
func TestOnlyAPureTighteningGoesLiveOnOneOperator(t *testing.T) {
	same := p1Data(t, nil, "")
	tests := []struct {
		name   string
		bundle func(t *testing.T) *policy.Bundle
		reason string // "" for a pure tightening
	}{
		{"p1's bundle released again", func(t *testing.T) *policy.Bundle { return embedded(t, "p3") }, ""},
		{"a limit lowered, declared", func(t *testing.T) *policy.Bundle {
			return p1With(t, "t", nil, p1Data(t, map[string]int64{"refund_auto": 4000}, ""), policy.LimitChange{Name: "refund_auto", From: 5000, To: 4000})
		}, ""},
		{"the rules laid out again and commented", func(t *testing.T) *policy.Bundle {
			return p1With(t, "t", func(s string) string {
				s = strings.ReplaceAll(s, "\t", "    ")
				return strings.Replace(s, "package countersign.call\n", "package countersign.call\n\n# A comment a reviewer need not read twice.\n\n", 1)
			}, same)
		}, ""},
		{"a Rego test added", func(t *testing.T) *policy.Bundle {
			b := p1Variant(t, "t", func(s string) string { return s }, map[string]string{
				"call/extra_test.rego": "package countersign.call_test\n\nimport data.countersign.call\n\ntest_lookup_is_known if call.tool_scope.lookup_order == \"lookup\"\n",
			})
			return b
		}, ""},
		{"an allow rule for one rep and order", func(t *testing.T) *policy.Bundle { return p1With(t, "t", loosen.AllowAnaOnO1002, same) },
			"Rego module /call/call.rego is changed"},
		{"R7 spares rep-ben", func(t *testing.T) *policy.Bundle { return p1With(t, "t", loosen.SpareBen, same) },
			"Rego module /call/call.rego is changed"},
		{"the approver rules accept reps", func(t *testing.T) *policy.Bundle {
			return p1Variant(t, "t", func(s string) string { return s }, map[string]string{
				"approver/approver.rego": loosen.AcceptAna(regoSource(t, "approver/approver.rego")),
			})
		}, "Rego module /approver/approver.rego is changed"},
		{"a rule file added", func(t *testing.T) *policy.Bundle {
			return p1Variant(t, "t", func(s string) string { return s }, map[string]string{
				"call/vip.rego": "package countersign.vip\n\nreps := {\"rep-ana\"}\n",
			})
		}, "Rego module /call/vip.rego is added"},
		{"a limit raised, declared", func(t *testing.T) *policy.Bundle {
			return p1With(t, "t", nil, p1Data(t, map[string]int64{"token_ttl_seconds": 120}, ""), policy.LimitChange{Name: "token_ttl_seconds", From: 60, To: 120})
		}, "data.countersign.limits.token_ttl_seconds 60 → 120 loosens token_ttl_seconds"},
		{"the rep's window shortened, declared", func(t *testing.T) *policy.Bundle {
			return p1With(t, "t", nil, p1Data(t, map[string]int64{"rep_window_seconds": 3600}, ""), policy.LimitChange{Name: "rep_window_seconds", From: 86400, To: 3600})
		}, "data.countersign.limits.rep_window_seconds 86400 → 3600 loosens rep_window_seconds"},
		{"a data key added", func(t *testing.T) *policy.Bundle {
			return p1With(t, "t", nil, p1Data(t, nil, `"vip": ["rep-ana"]`))
		}, `data.countersign.vip is added (["rep-ana"])`},
		{"a mode default set", func(t *testing.T) *policy.Bundle {
			return p1With(t, "t", nil, p1Data(t, nil, `"modes": {"issue_refund": "auto"}`))
		}, `data.countersign.modes.issue_refund is added ("auto")`},
		{"the breaker and the bounds at 2^31-1", func(t *testing.T) *policy.Bundle {
			return p1With(t, "t", nil, p1Data(t, nil, `"breaker": {"max_failures": 2147483647, "window_seconds": 600},
				"bounds": {"max_steps": 2147483647, "max_spend": 2147483647, "deadline_seconds": 2147483647, "max_attempts": 2147483647}`))
		}, "data.countersign.breaker.max_failures is added (2147483647)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &policy.MemHistory{}
			e := activeEngine(t, "p1", policy.Options{History: h})
			b := tt.bundle(t)
			_, err := e.Activate(ctx, b, policy.Activation{By: "ops-ida"})
			var aw *policy.AwaitingError
			switch {
			case tt.reason == "" && err != nil:
				t.Fatalf("a pure tightening: %v", err)
			case tt.reason == "" && e.Revision() != b.Revision():
				t.Fatalf("active %s, want %s", e.Revision(), b.Revision())
			case tt.reason == "":
				return
			case !errors.As(err, &aw) || e.Revision() != "p1":
				t.Fatalf("%v; active %s, want it awaiting a second operator and p1 active", err, e.Revision())
			}
			if !strings.Contains(strings.Join(aw.Reasons, "\n"), tt.reason) || !strings.Contains(aw.Error(), tt.reason) {
				t.Errorf("reasons %q (%v) do not say %q", aw.Reasons, aw, tt.reason)
			}
			if last := h.Records()[len(h.Records())-1]; last.Status != policy.StatusAwaitingSecondOperator {
				t.Errorf("recorded %s, want awaiting_second_operator", last.Status)
			}
			if _, err := e.Activate(ctx, b, twoOperators); err != nil || e.Revision() != b.Revision() {
				t.Errorf("approved by a second operator: %v; active %s", err, e.Revision())
			}
		})
	}
}

// The bounds of a run and the breaker's thresholds are in the limit table:
// over a bundle that sets them, lowering them (or lengthening the
// breaker's window) stays one operator's; raising them, or shortening the
// window, needs two; either way the change is declared, as a limit's is.
func TestBoundsAndBreakerAreLimits(t *testing.T) {
	set := func(steps, failures, window int64) string {
		return p1Data(t, nil, `"bounds": {"max_steps": `+itoa(steps)+`, "max_spend": 50000, "deadline_seconds": 3600, "max_attempts": 5},
			"breaker": {"max_failures": `+itoa(failures)+`, "window_seconds": `+itoa(window)+`}`)
	}
	bounded := p1With(t, "bounded", nil, set(50, 5, 600))
	change := func(name string, from, to int64) policy.LimitChange {
		return policy.LimitChange{Name: name, From: from, To: to}
	}
	tests := []struct {
		name    string
		data    string
		changes []policy.LimitChange
		want    string // "active", "awaiting" or "gate_failed"
	}{
		{"fewer steps", set(40, 5, 600), []policy.LimitChange{change("bounds.max_steps", 50, 40)}, "active"},
		{"fewer failures before the breaker trips", set(50, 3, 600), []policy.LimitChange{change("breaker.max_failures", 5, 3)}, "active"},
		{"a longer breaker window", set(50, 5, 1200), []policy.LimitChange{change("breaker.window_seconds", 600, 1200)}, "active"},
		{"steps at 2^31-1", set(2147483647, 5, 600), []policy.LimitChange{change("bounds.max_steps", 50, 2147483647)}, "awaiting"},
		{"failures at 2^31-1", set(50, 2147483647, 600), []policy.LimitChange{change("breaker.max_failures", 5, 2147483647)}, "awaiting"},
		{"a shorter breaker window", set(50, 5, 60), []policy.LimitChange{change("breaker.window_seconds", 600, 60)}, "awaiting"},
		{"fewer steps, undeclared", set(40, 5, 600), nil, "gate_failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := activeEngine(t, "p1", policy.Options{})
			if _, err := e.Activate(ctx, bounded, twoOperators); err != nil {
				t.Fatal(err)
			}
			r, err := e.Activate(ctx, p1With(t, "next", nil, tt.data, tt.changes...), policy.Activation{By: "ops-ida"})
			got := "active"
			switch {
			case errors.Is(err, policy.ErrAwaitingSecondOperator):
				got = "awaiting"
			case errors.Is(err, policy.ErrGateFailed):
				got = "gate_failed"
				if len(r.LimitFailures) != 1 || r.LimitFailures[0].Expected != "bounds.max_steps 50" {
					t.Errorf("limit failures %+v, want bounds.max_steps undeclared", r.LimitFailures)
				}
			case err != nil:
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("%s (%v), want %s", got, err, tt.want)
			}
		})
	}
}

// With the control removed (the second wave's rule: only a declared limit
// change that loosens needs two), a new allow rule goes live on one
// operator: what the control-removal matrix shows end to end.
func TestLimitOnlyLooseningIsTheRemovedControl(t *testing.T) {
	for _, limitOnly := range []bool{false, true} {
		e := activeEngine(t, "p1", policy.Options{LimitOnlyLoosening: limitOnly})
		_, err := e.Activate(ctx, p1With(t, "ana", loosen.AllowAnaOnO1002, p1Data(t, nil, "")), policy.Activation{By: "ops-ida"})
		if waits := errors.Is(err, policy.ErrAwaitingSecondOperator); waits == limitOnly {
			t.Errorf("limit-only %v: %v, active %s", limitOnly, err, e.Revision())
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
