package demo

import (
	"fmt"
	"strings"

	"github.com/countersign/countersign/executor/engine"
)

// Control names one of the engine's safety controls, as the matrix prints it.
type Control string

// The controls of engine.Controls.
const (
	IdempotencyKeys        Control = "idempotency_keys"
	RunDedupe              Control = "run_dedupe"
	WriteAhead             Control = "write_ahead"
	BindApproval           Control = "bind_approval"
	Cumulative             Control = "cumulative"
	StrictSchema           Control = "strict_schema"
	DownstreamCeiling      Control = "downstream_ceiling"
	CheckSwitchAtExecution Control = "check_switch_at_execution"
	SingleUseTokens        Control = "single_use_tokens"
	ReshipHistory          Control = "reship_history"
	NarrowDelegation       Control = "narrow_delegation"
	ResolveByReference     Control = "resolve_by_reference"
	RestrictedBuiltins     Control = "restricted_builtins"
	Breaker                Control = "breaker"
	LinePricing            Control = "line_pricing"
	ApprovalRoleFloor      Control = "approval_role_floor"
	ReferenceKeys          Control = "reference_keys"
	EffectFence            Control = "effect_fence"
	LeaseFencing           Control = "lease_fencing"
	TwoPersonLoosening     Control = "two_person_loosening"
)

// AllControls lists every control, in the order of engine.Controls.
func AllControls() []Control {
	return []Control{IdempotencyKeys, RunDedupe, WriteAhead, BindApproval, Cumulative,
		StrictSchema, DownstreamCeiling, CheckSwitchAtExecution, SingleUseTokens, ReshipHistory,
		NarrowDelegation, ResolveByReference, RestrictedBuiltins, Breaker, LinePricing, ApprovalRoleFloor, ReferenceKeys,
		EffectFence, LeaseFencing, TwoPersonLoosening}
}

// Without returns the designed controls with cs removed. It panics on a
// name outside AllControls: that is a mistake in a scenario table.
func Without(cs ...Control) engine.Controls {
	c := engine.DefaultControls()
	for _, x := range cs {
		switch x {
		case IdempotencyKeys:
			c.IdempotencyKeys = false
		case RunDedupe:
			c.RunDedupe = false
		case WriteAhead:
			c.WriteAhead = false
		case BindApproval:
			c.BindApproval = false
		case Cumulative:
			c.Cumulative = false
		case StrictSchema:
			c.StrictSchema = false
		case DownstreamCeiling:
			c.DownstreamCeiling = false
		case CheckSwitchAtExecution:
			c.CheckSwitchAtExecution = false
		case SingleUseTokens:
			c.SingleUseTokens = false
		case ReshipHistory:
			c.ReshipHistory = false
		case NarrowDelegation:
			c.NarrowDelegation = false
		case ResolveByReference:
			c.ResolveByReference = false
		case RestrictedBuiltins:
			c.RestrictedBuiltins = false
		case Breaker:
			c.Breaker = false
		case LinePricing:
			c.LinePricing = false
		case ApprovalRoleFloor:
			c.ApprovalRoleFloor = false
		case ReferenceKeys:
			c.ReferenceKeys = false
		case EffectFence:
			c.EffectFence = false
		case LeaseFencing:
			c.LeaseFencing = false
		case TwoPersonLoosening:
			c.TwoPersonLoosening = false
		default:
			panic(fmt.Sprintf("demo: unknown control %q", x))
		}
	}
	return c
}

// removedLabel is the "removed control" column: "idempotency_keys=false, ...".
func removedLabel(cs []Control) string {
	if len(cs) == 0 {
		return "-"
	}
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = string(c) + "=false"
	}
	return strings.Join(parts, ", ")
}
