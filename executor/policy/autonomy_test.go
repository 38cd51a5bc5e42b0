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
