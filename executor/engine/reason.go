package engine

import (
	"fmt"
	"strings"
	"time"

	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

// What an agent is told of a step that did not run (store.Reason): the
// fact that decided, in words and in numbers, and what it can do next.
// It is built here, in Go, from what the decision was made on (the
// policy's input and the bundle's limits), never asked of the bundle: a
// reason cannot change an outcome, and a bundle cannot word one that
// its numbers do not bear out. A rule this file does not know (a
// bundle's own) gets a text that names it and a next that is true of any
// denial or any approval.
//
// Money is shown as dollars (money.Cents.String) and kept in Facts as
// integer cents.

// The answers Next begins with, for an agent to branch on.
const (
	nextAskLead = "ask a lead: the step waits for a lead's approval; " +
		"resume the workflow (or wait on it) to see the answer, and do not propose the call again"
	nextNothing = "nothing: "
)

// Explain is what the agent is told of res, the decision on in under a
// bundle with limits lim (after the engine's own rules: the bounds,
// R12 and the tool's mode). An ALLOW is explained only as allowed.
func Explain(res policy.Result, in policy.Input, lim policy.Limits) store.Reason {
	switch res.Rule {
	case "R0-unknown-user":
		return unknownUser(in)
	case "default-deny":
		return store.Reason{Text: fmt.Sprintf("no rule of the policy allows %s", in.Tool), Facts: factsOf("tool", in.Tool),
			Next: nextNothing + "use a tool GET /v1/tools lists, with the arguments its schema names"}
	case "R1-scope-not-delegated":
		return scopeNotDelegated(in)
	case RuleDeadline, RuleStepLimit, RuleSpendLimit, RuleAttemptLimit:
		return outOfBounds(res.Rule, in, lim)
	case "R2-order-outside-region":
		return outsideRegion(in)
	case RuleLineNotRefundable:
		return lineNotRefundable(in)
	case "R3-refund-over-ceiling", "R4-exceeds-amount-paid", "R5-rep-daily-cap", "R6-agent-hourly-cap":
		return overCap(res.Rule, in, lim)
	case "R7-refund-needs-approval":
		return refundNeedsApproval(in, lim)
	case "R8-order-not-shipped", "R9-reship-needs-approval", "R10-order-already-reshipped", "R11-reship-limit":
		return reship(res.Rule, in, lim)
	case RuleApprovalOnly:
		return store.Reason{
			Text: fmt.Sprintf("%s runs in approval_only mode (set by an operator, or by the circuit breaker of this agent version): "+
				"every call of it that the policy allows waits for a lead", in.Tool),
			Facts: factsOf("tool", in.Tool, "mode", policy.ModeApprovalOnly), Next: nextAskLead}
	}
	switch res.Decision {
	case policy.Allow:
		return store.Reason{Text: "the policy allows the call (rule " + res.Rule + ")", Next: "nothing to do: it runs"}
	case policy.RequireApproval:
		return store.Reason{Text: "the policy asks a lead to approve this call (rule " + res.Rule + ")", Next: nextAskLead}
	}
	return store.Reason{Text: "the policy denies this call (rule " + res.Rule + ")",
		Next: nextNothing + "the policy refuses this call as it stands; tell the person it was refused and under which rule"}
}

func unknownUser(in policy.Input) store.Reason {
	next := nextNothing + "a call is made with the token of the rep the agent works for"
	if in.User == nil {
		return store.Reason{Text: "the call names no rep the policy knows", Next: next}
	}
	return store.Reason{
		Text:  fmt.Sprintf("%s is not a rep the policy knows (role %q, region %q): a call needs a rep with a region and delegated scopes", in.User.ID, in.User.Role, in.User.Region),
		Facts: factsOf("user", in.User.ID, "role", in.User.Role, "region", in.User.Region), Next: next}
}

func scopeNotDelegated(in policy.Input) store.Reason {
	spec, _ := tool.Lookup(in.Tool)
	var rep string
	var scopes []string
	if in.User != nil {
		rep, scopes = in.User.ID, in.User.Scopes
	}
	return store.Reason{
		Text: fmt.Sprintf("%s has not delegated the %s scope that %s needs (delegated: %s)",
			orSomeone(rep), spec.Scope, in.Tool, orNone(strings.Join(scopes, ", "))),
		Facts: factsOf("rep", rep, "scope", spec.Scope, "scopes", scopes),
		Next:  nextNothing + "the rep's delegation does not cover it; a rep whose delegation has the " + spec.Scope + " scope makes this call",
	}
}

// outOfBounds explains a call over its workflow's bounds (B1-B4).
func outOfBounds(rule string, in policy.Input, lim policy.Limits) store.Reason {
	r := in.Workflow
	if r == nil {
		r = &policy.Run{}
	}
	handBack := nextNothing + "this workflow may do no more of it; hand the ticket back to a person"
	switch rule {
	case RuleDeadline:
		return store.Reason{Text: "the workflow's deadline has passed: it pays nothing more", Next: handBack}
	case RuleStepLimit:
		return store.Reason{Text: fmt.Sprintf("this is step %d of a workflow bounded to %d steps", r.Step, r.MaxSteps),
			Facts: factsOf("step", r.Step, "max_steps", r.MaxSteps), Next: handBack}
	case RuleAttemptLimit:
		return store.Reason{Text: fmt.Sprintf("this is attempt %d of the step; a step is attempted at most %d times", r.Attempt, r.MaxAttempts),
			Facts: factsOf("attempt", r.Attempt, "max_attempts", r.MaxAttempts), Next: handBack}
	}
	left := max(r.MaxSpend-r.Spent, 0)
	return store.Reason{
		Text:  fmt.Sprintf("%s requested; the workflow has refunded %s of its %s bound", in.Args.Amount, r.Spent, r.MaxSpend),
		Facts: factsOf("requested", in.Args.Amount, "spent", r.Spent, "max_spend", r.MaxSpend, "left", left),
		Next:  smaller(in, lim, "the workflow's spending bound is used up; hand the ticket back to a person"),
	}
}

func outsideRegion(in policy.Input) store.Reason {
	o, u := in.Order, in.User
	switch {
	case o == nil:
		return store.Reason{Text: fmt.Sprintf("order %s was not found, or is not one the rep may see", in.Args.Order),
			Facts: factsOf("order", in.Args.Order), Next: nextNothing + "check the order id with the customer; lookup_order reads an order"}
	case u != nil && u.Region == RegionMismatch:
		return store.Reason{Text: "the token presented names another region than the rep's delegation to this workflow",
			Facts: factsOf("order", o.ID), Next: nextNothing + "drive the workflow with a token of its rep, in the rep's region"}
	case u != nil && o.Region != u.Region:
		return store.Reason{Text: fmt.Sprintf("order %s is in region %s; the rep's region is %s", o.ID, o.Region, u.Region),
			Facts: factsOf("order", o.ID, "order_region", o.Region, "rep_region", u.Region),
			Next:  nextNothing + "only a rep of region " + o.Region + " acts on this order; hand the ticket to one"}
	}
	return store.Reason{Text: fmt.Sprintf("the record of order %s has no status or amount paid the policy can read", o.ID),
		Facts: factsOf("order", o.ID), Next: nextNothing + "the order record is incomplete; a person checks it in the order system"}
}

func lineNotRefundable(in policy.Input) store.Reason {
	a := in.Args
	l, ok := in.Order.Line(a.Line)
	switch {
	case in.Order == nil:
		return outsideRegion(in)
	case !ok:
		return store.Reason{Text: fmt.Sprintf("order %s has no line %s", a.Order, a.Line), Facts: factsOf("order", a.Order, "line", a.Line),
			Next: nextNothing + "name a line of the order; lookup_order lists them"}
	}
	left := max(l.Quantity-l.RefundedQuantity, 0)
	f := factsOf("order", a.Order, "line", a.Line, "quantity", a.Quantity, "bought", l.Quantity, "refunded_quantity", l.RefundedQuantity, "left", left)
	if a.Quantity > left {
		next := nextNothing + "every unit of line " + a.Line + " is refunded already"
		if left > 0 {
			next = fmt.Sprintf("a smaller quantity, at most %d", left)
			f["max_quantity"] = left
		}
		return store.Reason{Text: fmt.Sprintf("%d of line %s of order %s requested; %d left to refund (%d bought, %d refunded)",
			a.Quantity, a.Line, a.Order, left, l.Quantity, l.RefundedQuantity), Facts: f, Next: next}
	}
	return store.Reason{Text: fmt.Sprintf("line %s of order %s cannot be refunded at its price (%s a unit)", a.Line, a.Order, l.UnitAmount),
		Facts: f, Next: nextNothing + "the order record cannot price this refund; a person checks the line in the order system"}
}

// overCap explains a refund over one of the amount caps (R3-R6).
func overCap(rule string, in policy.Input, lim policy.Limits) store.Reason {
	a, t := in.Args.Amount, in.Totals
	switch rule {
	case "R3-refund-over-ceiling":
		return store.Reason{Text: fmt.Sprintf("%s requested; one refund is at most %s", a, lim.RefundMax),
			Facts: factsOf("requested", a, "refund_max", lim.RefundMax), Next: smaller(in, lim, "")}
	case "R4-exceeds-amount-paid":
		var paid money.Cents
		if in.Order != nil {
			paid = in.Order.Paid
		}
		left := max(paid-t.OrderRefunded, 0)
		return store.Reason{Text: fmt.Sprintf("%s requested, %s left of %s paid", a, left, paid),
			Facts: factsOf("order", in.Args.Order, "requested", a, "paid", paid, "refunded", t.OrderRefunded, "left", left),
			Next:  smaller(in, lim, "the order's amount paid is refunded in full")}
	case "R5-rep-daily-cap":
		return store.Reason{Text: fmt.Sprintf("rep's day: %s of %s used; %s requested", t.RepDay, lim.RepDaily, a),
			Facts: factsOf("requested", a, "rep_day", t.RepDay, "rep_daily", lim.RepDaily, "left", max(lim.RepDaily-t.RepDay, 0),
				"window_seconds", int64(lim.RepWindow/time.Second)),
			Next: smaller(in, lim, "the rep's day is used up; room comes back as refunds leave the rolling "+window(lim.RepWindow))}
	}
	return store.Reason{Text: fmt.Sprintf("agent's hour: %s of %s used; %s requested", t.AgentHour, lim.AgentHourly, a),
		Facts: factsOf("requested", a, "agent_hour", t.AgentHour, "agent_hourly", lim.AgentHourly, "left", max(lim.AgentHourly-t.AgentHour, 0)),
		Next:  smaller(in, lim, "the agent's hour is used up; room comes back as refunds leave the rolling hour")}
}

func refundNeedsApproval(in policy.Input, lim policy.Limits) store.Reason {
	a, refunded := in.Args.Amount, in.Totals.OrderRefunded
	next := nextAskLead
	if m := atMost(in, min(lim.RefundAuto-refunded, room(in, lim))); m != "" {
		next += "; or amend it to " + m + ", which runs without one"
	}
	return store.Reason{
		Text: fmt.Sprintf("%s requested on order %s, %s refunded before: above %s in all on one order a lead approves",
			a, in.Args.Order, refunded, lim.RefundAuto),
		Facts: factsOf("order", in.Args.Order, "requested", a, "refunded", refunded, "refund_auto", lim.RefundAuto),
		Next:  next,
	}
}

// reship explains the reship rules (R8-R11).
func reship(rule string, in policy.Input, lim policy.Limits) store.Reason {
	id, n := in.Args.Order, in.Totals.OrderReships
	switch rule {
	case "R8-order-not-shipped":
		status := ""
		if in.Order != nil {
			status = in.Order.Status
		}
		return store.Reason{Text: fmt.Sprintf("order %s is %s, not shipped", id, orNone(status)), Facts: factsOf("order", id, "status", status),
			Next: nextNothing + "only a shipped order is reshipped; if it was never sent, a person checks it in the order system"}
	case "R9-reship-needs-approval":
		var paid money.Cents
		if in.Order != nil {
			paid = in.Order.Paid
		}
		return store.Reason{Text: fmt.Sprintf("order %s was paid %s; reshipping an order paid over %s needs a lead's approval", id, paid, lim.ReshipApprovalValue),
			Facts: factsOf("order", id, "paid", paid, "reship_approval_value", lim.ReshipApprovalValue), Next: nextAskLead}
	case "R10-order-already-reshipped":
		return store.Reason{Text: fmt.Sprintf("order %s was reshipped once before; a second reship needs a lead's approval", id),
			Facts: factsOf("order", id, "reships", n), Next: nextAskLead}
	}
	return store.Reason{Text: fmt.Sprintf("order %s was reshipped %d times before; it is not reshipped again", id, n),
		Facts: factsOf("order", id, "reships", n), Next: nextNothing + "an order is reshipped at most twice; a person decides what else the customer gets"}
}

// room is the largest refund like in's that every amount cap leaves room
// for: the ceiling (R3), what is left of the order (R4), the rep's day
// (R5), the agent's hour (R6), the workflow's spending bound (B2) and the
// rep's delegated ceiling, which the ledger enforces. Zero: none.
func room(in policy.Input, lim policy.Limits) money.Cents {
	r := min(lim.RefundMax, lim.RepDaily-in.Totals.RepDay, lim.AgentHourly-in.Totals.AgentHour)
	if in.Order != nil {
		r = min(r, in.Order.Paid-in.Totals.OrderRefunded)
	}
	if w := in.Workflow; w != nil {
		r = min(r, w.MaxSpend-w.Spent)
	}
	if u := in.User; u != nil && u.RefundCeiling > 0 {
		r = min(r, u.RefundCeiling)
	}
	return max(r, 0)
}

// smaller is the next of a refund over a cap: a smaller amount (or, for a
// line-item refund, a smaller quantity) that every cap leaves room for,
// or nothing, for why, when none does.
func smaller(in policy.Input, lim policy.Limits, why string) string {
	if why == "" {
		why = "no amount fits the limits now"
	}
	switch m := atMost(in, room(in, lim)); {
	case m == "":
		return nextNothing + why
	case in.Args.IsLine():
		return "a smaller quantity, " + m
	default:
		return "a smaller amount, " + m
	}
}

// atMost says the largest refund like in's within limit: an amount, or
// for a line-item refund the units of its line that are left; "" when
// none fits.
func atMost(in policy.Input, limit money.Cents) string {
	if !in.Args.IsLine() {
		if limit <= 0 {
			return ""
		}
		return "at most " + limit.String()
	}
	l, ok := in.Order.Line(in.Args.Line)
	if !ok || l.UnitAmount <= 0 {
		return ""
	}
	q := min(int64(limit/l.UnitAmount), l.Quantity-l.RefundedQuantity)
	if q <= 0 {
		return ""
	}
	return fmt.Sprintf("at most %d of line %s (%s)", q, l.ID, l.UnitAmount*money.Cents(q))
}

// held is the reason of a step held with note: its tool switched off, or
// its workflow's delegation expired.
func held(name tool.Name, note string) *store.Reason {
	if note == NoteDelegationExpired {
		return &store.Reason{Text: "the rep's delegation to the agent for this workflow has expired",
			Next: "resume the workflow with a current token of its rep: the step is decided then"}
	}
	return &store.Reason{Text: fmt.Sprintf("%s is switched off by an operator", name), Facts: factsOf("tool", name),
		Next: "wait: resume the workflow once an operator switches " + string(name) + " on; nothing has run"}
}

// rejected is the reason of a step whose call a lead rejected (approval a).
func rejected(a store.Approval) *store.Reason {
	text := fmt.Sprintf("%s rejected this call (approval %s)", a.Approver, a.ID)
	if a.Comment != "" {
		text += fmt.Sprintf(": %q", a.Comment)
	}
	return &store.Reason{Text: text, Facts: factsOf("approval", a.ID, "approver", a.Approver, "comment", a.Comment),
		Next: nextNothing + "a lead refused this exact call; tell the person why, and do not propose it again"}
}

// refusedBy is the reason of a step a system of record refused.
func refusedBy(system string, r *Refused) *store.Reason {
	return &store.Reason{Text: fmt.Sprintf("the %s refused the call: %s: %s", system, r.Code, r.Message),
		Facts: factsOf("system", system, "code", r.Code),
		Next:  nextNothing + "the system of record refused it; tell the person why"}
}

// explains reports whether a step in status st carries a reason.
func explains(st store.StepStatus) bool {
	return st == store.StepDenied || st == store.StepWaitingApproval || st == store.StepHeld
}

// factsOf is a Facts map from key, value pairs, leaving out empty strings.
func factsOf(kv ...any) map[string]any {
	m := make(map[string]any, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		k, _ := kv[i].(string)
		switch v := kv[i+1].(type) {
		case string:
			if v != "" {
				m[k] = v
			}
		case tool.Name:
			m[k] = string(v)
		case policy.Mode:
			m[k] = string(v)
		case money.Cents:
			m[k] = int64(v)
		case []string:
			if v != nil {
				m[k] = v
			}
		default:
			m[k] = v
		}
	}
	return m
}

// window says a rolling window in words: "24 hours", "90 minutes".
func window(d time.Duration) string {
	if d%time.Hour == 0 {
		return fmt.Sprintf("%d hours", d/time.Hour)
	}
	return fmt.Sprintf("%d minutes", d/time.Minute)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func orSomeone(id string) string {
	if id == "" {
		return "the rep"
	}
	return id
}
