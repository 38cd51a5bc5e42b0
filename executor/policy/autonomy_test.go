package policy_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/tool"
)

// A bundle's data may set each tool's default mode and the breaker's
// thresholds; without them every tool is auto and the breaker has its
// documented defaults.
func TestAutonomyFromBundleData(t *testing.T) {
	p1 := embedded(t, "p1").Autonomy()
	if p1.Mode(tool.IssueRefund) != policy.ModeAuto || p1.Breaker != policy.DefaultBreaker {
		t.Errorf("p1: refund mode %s, breaker %+v; want auto and %+v", p1.Mode(tool.IssueRefund), p1.Breaker, policy.DefaultBreaker)
	}
	data := `{"countersign": {"limits": ` + p1LimitsObject + `,
		"modes": {"issue_refund": "shadow", "reship_order": "approval_only"},
		"breaker": {"window_seconds": 60, "max_failures": 3}}}`
	a := customBundle(t, "ramp", regoSource(t, "call/call.rego"), data, nil).Autonomy()
	for name, want := range map[tool.Name]policy.Mode{tool.IssueRefund: policy.ModeShadow,
		tool.ReshipOrder: policy.ModeApprovalOnly, tool.LookupOrder: policy.ModeAuto} {
		if got := a.Mode(name); got != want {
			t.Errorf("%s: mode %s, want %s", name, got, want)
		}
	}
	if want := (policy.BreakerLimits{Window: time.Minute, MaxFailures: 3}); a.Breaker != want {
		t.Errorf("breaker %+v, want %+v", a.Breaker, want)
	}
}

// Every problem with modes or the breaker is reported at once, and the
// bundle is refused.
func TestAutonomyProblemsRefuseTheBundle(t *testing.T) {
	data := `{"countersign": {"limits": ` + p1LimitsObject + `,
		"modes": {"issue_refund": "manual", "send_email": "auto"},
		"breaker": {"window_seconds": 0, "max_failures": 2.5, "cooldown": 9}}}`
	_, err := policy.LoadFS(customFS(t, "bad", regoSource(t, "call/call.rego"), data, nil))
	if !errors.Is(err, policy.ErrInvalidBundle) {
		t.Fatalf("err %v, want ErrInvalidBundle", err)
	}
	for _, want := range []string{"issue_refund must be shadow", `"send_email" is not a tool`,
		"window_seconds must be", "max_failures must be", `unknown member "cooldown"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// A bundle's data may set every workflow's bounds; a member it leaves out
// has its documented default, and max_spend defaults to the rep's daily
// cap.
func TestBoundsFromBundleData(t *testing.T) {
	p1 := embedded(t, "p1")
	want := policy.DefaultBounds
	want.MaxSpend = p1.Limits().RepDaily
	if got := p1.Autonomy().Bounds; got != want {
		t.Errorf("p1 bounds %+v, want %+v", got, want)
	}
	data := `{"countersign": {"limits": ` + p1LimitsObject + `,
		"bounds": {"max_steps": 3, "max_spend": 7500, "deadline_seconds": 600}}}`
	got := customBundle(t, "bounded", regoSource(t, "call/call.rego"), data, nil).Autonomy().Bounds
	want = policy.Bounds{MaxSteps: 3, MaxSpend: 7500, Deadline: 10 * time.Minute, MaxAttempts: policy.DefaultBounds.MaxAttempts}
	if got != want {
		t.Errorf("bounds %+v, want %+v", got, want)
	}
}

// Every problem with the bounds is reported at once, and the bundle is
// refused.
func TestBoundsProblemsRefuseTheBundle(t *testing.T) {
	for _, tc := range []struct{ name, bounds, want string }{
		{"not an object", `[1]`, "bounds must be an object"},
		{"zero, fractional, a string and an unknown member",
			`{"max_steps": 0, "max_spend": 10.5, "deadline_seconds": "1h", "retries": 2}`,
			`bounds: max_steps must be|bounds: max_spend must be|bounds: deadline_seconds must be|unknown member "retries"`},
		{"too many attempts", `{"max_attempts": 4294967296}`, "bounds: max_attempts must be"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := `{"countersign": {"limits": ` + p1LimitsObject + `, "bounds": ` + tc.bounds + `}}`
			_, err := policy.LoadFS(customFS(t, "bad", regoSource(t, "call/call.rego"), data, nil))
			if !errors.Is(err, policy.ErrInvalidBundle) {
				t.Fatalf("err %v, want ErrInvalidBundle", err)
			}
			for _, want := range strings.Split(tc.want, "|") {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}
