package engine

import (
	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/tool"
)

// RuleLineNotRefundable names a line-item refund the order record cannot
// pay: no such line, more units than are left to refund, or an amount
// that is not the line's price times the quantity. The call policy names
// it first among the refund rules (rego/call); the engine applies it too,
// so a bundle released before line-item refunds (p1) still refuses such a
// call under its own rule, not as an amount over the ceiling.
const RuleLineNotRefundable = "R12-line-not-refundable"

// lineChecked is res, denied under R12 when in is a line-item refund that
// the order record in in cannot pay.
func lineChecked(res policy.Result, in policy.Input) policy.Result {
	if in.Tool != tool.IssueRefund || !in.Args.IsLine() || lineRefundable(in) {
		return res
	}
	res.Decision, res.Rule = policy.Deny, RuleLineNotRefundable
	return res
}

// lineRefundable is rego/call's line_refundable for a line-item refund.
func lineRefundable(in policy.Input) bool {
	if in.Order == nil {
		return false
	}
	l, ok := in.Order.Line(in.Args.Line)
	q := in.Args.Quantity
	return ok && q > 0 && l.RefundedQuantity >= 0 && q <= l.Quantity-l.RefundedQuantity &&
		in.Args.Amount == l.UnitAmount*money.Cents(q)
}
