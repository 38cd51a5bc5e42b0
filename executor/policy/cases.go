package policy

import (
	"strconv"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/tool"
)

// The gate's case suite. It is written here, in Go, and not in bundles: a
// bundle author can change a bundle's rules, data and tests, but not the
// cases a bundle must answer to be activated. The amounts are not pinned:
// they are derived from limits, so a declared change of a limit moves its
// cases with it.
//
// Boundary cases run at the limits in force (see Check): each limit just
// below (the auto limit only), at and just above, where a units mistake
// shows. "Just" is $1 for the refund limits, one cent for the reshipment
// threshold and the caps, one second for the approval life.
//
// Invariant cases hold for any limits: missing or mistyped input denies,
// the rules answer in their R0-R11 order, prior refunds count toward what
// was paid and toward the auto limit. Two of them are about the bundle's
// own numbers and run at the candidate's own limits, so that a bundle
// consistent with its own data passes them whatever it declares: a split
// refund crossing its auto limit needs approval, and a refund above its
// maximum (the rep's ceiling here) is denied. The shipped Rego bounds a
// refund by the bundle's maximum (R3), not by the ceiling in the rep's
// token, which the ledger enforces; so the ceiling case sets the ceiling
// at that maximum. There is deliberately no case "$1 below the maximum":
// bundle p2's rejection must list exactly the seed's three cases, and that
// one would be a fourth.

type callCase struct {
	name   string
	amount money.Cents // shown in the report; zero where none applies
	input  ast.Value
	// typed is the input as an Input, nil for the cases whose input an
	// Input cannot express (a member missing or mistyped).
	typed *Input
	want  Decision
	rule  string
}

type approverCase struct {
	name string
	in   ApproverInput
	want Refusal
}

const (
	dollar    money.Cents = 100
	allowRule             = "default-allow-after-checks"
	r2                    = "R2-order-outside-region"
	r3                    = "R3-refund-over-ceiling"
	r4                    = "R4-exceeds-amount-paid"
	r7                    = "R7-refund-needs-approval"
)

// caseRep is rep-ana's delegation, with a ceiling of the given maximum.
func caseRep(ceiling money.Cents) *User {
	return &User{ID: "rep-ana", Role: "rep", Region: "EU", Scopes: []string{"lookup", "refund", "reship"}, RefundCeiling: ceiling}
}

// caseOrder is a shipped order in the rep's region, placed ten days and
// shipped eight days before the gate's time.
func caseOrder(id string, paid money.Cents) Order {
	return Order{ID: id, Region: "EU", Customer: "customer-9", Paid: paid, Status: "shipped",
		PlacedAt: gateTime.Add(-10 * day), ShippedAt: gateTime.Add(-8 * day)}
}

const day = 24 * time.Hour

func call(name string, in Input, want Decision, rule string) callCase {
	return callCase{name: name, amount: in.Args.Amount, input: callInput(in), typed: &in, want: want, rule: rule}
}

// CaseInputs are the inputs of the gate's call cases at limits l (those
// an Input can express), in the suite's order: the boundaries a reviewer's
// generated inputs start from.
func CaseInputs(l Limits) []Input {
	var out []Input
	for _, c := range callCases(l, l) {
		if c.typed != nil {
			out = append(out, *c.typed)
		}
	}
	return out
}

// ApproverCaseInputs are the inputs of the gate's approver cases at
// limits l, in the suite's order, timed from the gate's fixed date.
func ApproverCaseInputs(l Limits) []ApproverInput {
	var out []ApproverInput
	for _, c := range approverCases(l) {
		out = append(out, c.in)
	}
	return out
}

// The cases' inputs are decided at the gate's time, gateTime, which they
// carry as now: a bundle whose rules read the time answers them the same
// on every run.

func refund(user *User, o Order, t Totals, amount money.Cents) Input {
	return Input{User: user, Tool: tool.IssueRefund, Args: tool.Args{Order: o.ID, Amount: amount}, Order: &o, Totals: t, Now: gateTime}
}

func reship(user *User, o Order, reships int) Input {
	return Input{User: user, Tool: tool.ReshipOrder, Args: tool.Args{Order: o.ID}, Order: &o, Totals: Totals{OrderReships: reships}, Now: gateTime}
}

// edited is in as the policy sees it with one member replaced by v, or
// removed when v is nil: input that a typed Input cannot express.
func edited(in Input, key string, v *ast.Term) ast.Value {
	out := ast.NewObject()
	callInput(in).(ast.Object).Foreach(func(k, old *ast.Term) {
		switch {
		case !k.Equal(ast.StringTerm(key)):
			out.Insert(k, old)
		case v != nil:
			out.Insert(k, v)
		}
	})
	return out
}

// callCases derives the call cases from the limits in force l and the
// candidate's own limits own.
func callCases(l, own Limits) []callCase {
	rep := caseRep(l.RefundMax)
	readOnly := &User{ID: "rep-cy", Role: "rep", Region: "EU", Scopes: []string{"lookup"}}
	// Paid over the maximum, so that R4 never hides a refund limit.
	big := caseOrder("O-9001", l.RefundMax+10*dollar)
	// Paid exactly the auto limit, so that R4 answers before R7 could.
	paidAuto := caseOrder("O-9002", l.RefundAuto)
	atReship := caseOrder("O-9003", l.ReshipApprovalValue)
	overReship := caseOrder("O-9004", l.ReshipApprovalValue+1)
	notShipped := caseOrder("O-9005", l.ReshipApprovalValue)
	notShipped.Status, notShipped.ShippedAt = "paid", time.Time{}
	otherRegion := caseOrder("O-9006", big.Paid)
	otherRegion.Region = "US"
	// The caps are probed with a refund the auto limit allows.
	day, hour := min(l.RefundAuto, l.RepDaily), min(l.RefundAuto, l.AgentHourly)
	none := Totals{}
	small := l.RefundAuto - dollar

	return []callCase{
		// The boundaries of the limits in force.
		call("refund under the auto limit", refund(rep, big, none, small), Allow, allowRule),
		call("refund at the auto limit", refund(rep, big, none, l.RefundAuto), Allow, allowRule),
		call("refund above the auto limit", refund(rep, big, none, l.RefundAuto+dollar), RequireApproval, r7),
		call("refund at the maximum", refund(rep, big, none, l.RefundMax), RequireApproval, r7),
		call("refund above the maximum", refund(rep, big, none, l.RefundMax+dollar), Deny, r3),
		call("rep day lands on the cap", refund(rep, big, Totals{RepDay: l.RepDaily - day}, day), Allow, allowRule),
		call("rep day over the cap", refund(rep, big, Totals{RepDay: l.RepDaily - day + 1}, day), Deny, "R5-rep-daily-cap"),
		call("agent hour lands on the cap", refund(rep, big, Totals{AgentHour: l.AgentHourly - hour}, hour), Allow, allowRule),
		call("agent hour over the cap", refund(rep, big, Totals{AgentHour: l.AgentHourly - hour + 1}, hour), Deny, "R6-agent-hourly-cap"),
		call("reship an order paid the approval value", reship(rep, atReship, 0), Allow, allowRule),
		call("reship an order paid a cent over the approval value", reship(rep, overReship, 0), RequireApproval, "R9-reship-needs-approval"),

		// Missing or mistyped input denies.
		call("refund of nothing", refund(rep, big, none, 0), Deny, r3),
		{name: "refund without an amount", input: edited(refund(rep, big, none, small), "args",
			ast.ObjectTerm(field("order", str(big.ID)))), want: Deny, rule: r3},
		{name: "refund with the amount as a string", input: edited(refund(rep, big, none, small), "args",
			ast.ObjectTerm(field("order", str(big.ID)), field("amount", str(strconv.FormatInt(int64(small), 10))))), amount: small, want: Deny, rule: r3},
		{name: "refund without an order record", amount: small, input: edited(refund(rep, big, none, small), "order", nil), want: Deny, rule: r2},
		call("unknown user", refund(nil, big, none, small), Deny, "R0-unknown-user"),
		call("unknown tool", Input{User: rep, Tool: "delete_order", Args: tool.Args{Order: big.ID}, Order: &big, Now: gateTime}, Deny, "default-deny"),
		call("refund scope not delegated", refund(readOnly, big, none, small), Deny, "R1-scope-not-delegated"),
		call("order outside the rep's region", refund(rep, otherRegion, none, small), Deny, r2),
		call("look up an order in region", Input{User: rep, Tool: tool.LookupOrder, Args: tool.Args{Order: big.ID}, Order: &big, Now: gateTime}, Allow, allowRule),

		// What was paid bounds the refunds of an order, prior ones included.
		call("refund of exactly what was paid", refund(rep, paidAuto, none, paidAuto.Paid), Allow, allowRule),
		call("refund over what was paid", refund(rep, paidAuto, none, paidAuto.Paid+1), Deny, r4),
		call("prior refunds count toward what was paid", refund(rep, paidAuto, Totals{OrderRefunded: paidAuto.Paid / 2}, paidAuto.Paid-paidAuto.Paid/2+1), Deny, r4),

		// The bundle's own numbers.
		call("a prior refund and this one cross the bundle's own auto limit",
			refund(caseRep(own.RefundMax), caseOrder("O-9007", own.RefundAuto+dollar), Totals{OrderRefunded: own.RefundAuto}, dollar), RequireApproval, r7),
		call("refund above the rep's ceiling, the bundle's own maximum",
			refund(caseRep(own.RefundMax), caseOrder("O-9008", own.RefundMax+1), none, own.RefundMax+1), Deny, r3),

		// Reshipments, and the order of the rules where two apply.
		call("reship an order not shipped", reship(rep, notShipped, 0), Deny, "R8-order-not-shipped"),
		call("reship an order reshipped once before, paid over the approval value", reship(rep, overReship, 1), RequireApproval, "R10-order-already-reshipped"),
		call("reship an order reshipped twice before", reship(rep, atReship, 2), Deny, "R11-reship-limit"),
		call("reship an order not shipped and reshipped twice", reship(rep, notShipped, 2), Deny, "R8-order-not-shipped"),
		call("refund without the scope, outside the region", refund(readOnly, otherRegion, none, small), Deny, "R1-scope-not-delegated"),
		call("refund over what was paid, the rep's day spent", refund(rep, paidAuto, Totals{RepDay: l.RepDaily}, paidAuto.Paid+1), Deny, r4),
	}
}

// The approval-authority cases: a refund requested by rep-ben (US),
// approved by each person in turn; only a US lead whose limit covers it,
// within the approval life in force, may approve.
func approverCases(l Limits) []approverCase {
	created := gateTime
	expires := created.Add(l.ApprovalTTL)
	ben := Requester{ID: "rep-ben", Region: "US"}
	eli := Approver{ID: "lead-eli", Role: "lead", Region: "US", ApproveLimit: 50000}
	approval := func(a Approver, amount money.Cents, now time.Time) ApproverInput {
		return ApproverInput{Approver: a, Requester: ben, Tool: tool.IssueRefund, Amount: amount, Expires: expires, Now: now}
	}
	return []approverCase{
		{name: "approve as the requester", in: approval(Approver{ID: "rep-ben", Role: "rep", Region: "US"}, 40000, created), want: RequesterCannotApprove},
		{name: "approve as a rep", in: approval(Approver{ID: "rep-cy", Role: "rep", Region: "EU"}, 40000, created), want: ApproverNotLead},
		{name: "approve above the lead's limit", in: approval(Approver{ID: "lead-fay", Role: "lead", Region: "US", ApproveLimit: 10000}, 40000, created), want: AboveApproverLimit},
		{name: "approve from another region", in: approval(Approver{ID: "lead-dee", Role: "lead", Region: "EU", ApproveLimit: 50000}, 40000, created), want: ApproverOutsideRegion},
		{name: "approve a second before the expiry", in: approval(eli, 40000, expires.Add(-time.Second)), want: ""},
		{name: "approve at the expiry", in: approval(eli, 40000, expires), want: ApprovalExpired},
		{name: "approve a second after the expiry", in: approval(eli, 40000, expires.Add(time.Second)), want: ApprovalExpired},
		{name: "approve at the lead's limit in time", in: approval(eli, 50000, created), want: ""},
	}
}
