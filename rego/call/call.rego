# Package countersign.call decides one tool call an agent proposes.
#
# `decision` is the first rule that matches, read top to bottom, and names
# that rule. Every denial is written as `not <positive predicate>`: a
# predicate over missing or mistyped input is undefined, so its negation
# holds and the call is denied instead of falling through to ALLOW.
#
# Money is integer cents. Limits come from the bundle's data
# (data.countersign.limits), never from the input.
package countersign.call

# The scope a representative must have delegated for each tool. A tool that
# is not listed is unknown and falls to the default deny.
tool_scope := {
	"lookup_order": "lookup",
	"issue_refund": "refund",
	"reship_order": "reship",
}

default decision := {"decision": "DENY", "rule": "default-deny"}

decision := deny("R0-unknown-user") if {
	not known_user
} else := deny("default-deny") if {
	not known_tool
} else := deny("R1-scope-not-delegated") if {
	not scope_delegated
} else := deny("B3-workflow-deadline") if {
	bounded
	not before_deadline
} else := deny("B1-workflow-step-limit") if {
	bounded
	not within_step_limit
} else := deny("B2-workflow-spend-limit") if {
	bounded
	not within_spend_limit
} else := deny("B4-attempt-limit") if {
	bounded
	not within_attempt_limit
} else := deny("R2-order-outside-region") if {
	not order_in_region
} else := refund_decision if {
	input.tool == "issue_refund"
} else := reship_decision if {
	input.tool == "reship_order"
} else := allow if {
	# Named, not a bare else: a tool that reaches this line without its own
	# rules is denied by default, never allowed.
	input.tool == "lookup_order"
}

# R12 and R3-R7 apply to refunds. R12 comes first: a line-item refund must
# name a line of the order with the units left to refund, at the line's
# price, before its amount is weighed against any limit.
refund_decision := deny("R12-line-not-refundable") if {
	not line_refundable
} else := deny("R3-refund-over-ceiling") if {
	not amount_within_max
} else := deny("R4-exceeds-amount-paid") if {
	not within_amount_paid
} else := deny("R5-rep-daily-cap") if {
	not within_rep_daily_cap
} else := deny("R6-agent-hourly-cap") if {
	not within_agent_hourly_cap
} else := require_approval("R7-refund-needs-approval") if {
	not within_auto_refund
} else := allow

# R8-R11 apply to reshipments. R10 and R11 count the order's reships in
# every workflow (done, started or unknown), so splitting reships across
# workflows meets the same limit. R11 is written on the first reship, so an
# order_reships that is missing, mistyped, fractional or negative denies.
reship_decision := deny("R8-order-not-shipped") if {
	not input.order.status == "shipped"
} else := require_approval("R10-order-already-reshipped") if {
	input.totals.order_reships == 1
} else := deny("R11-reship-limit") if {
	not first_reship
} else := require_approval("R9-reship-needs-approval") if {
	not within_reship_auto
} else := allow

allow := {"decision": "ALLOW", "rule": "default-allow-after-checks"}

deny(rule) := {"decision": "DENY", "rule": rule}

require_approval(rule) := {"decision": "REQUIRE_APPROVAL", "rule": rule}

# Each predicate below is one rule with its checks inline: every further
# rule or function a decision consults costs microseconds, on every call.

# A representative with an identity, a region and a list of delegated scopes.
known_user if {
	input.user.role == "rep"
	is_string(input.user.id)
	input.user.id != ""
	is_string(input.user.region)
	input.user.region != ""
	is_array(input.user.scopes)
}

known_tool if tool_scope[input.tool]

scope_delegated if tool_scope[input.tool] in input.user.scopes

# B1-B4 bound the workflow the call is in, whatever the tool, so they come
# right after the delegation. The engine sends input.workflow for every
# call it decides (its bounds, where the workflow stands, and whether its
# deadline has passed, by the engine's clock); an input without it (a
# decision recorded before workflows had bounds, replayed) is not bounded
# by these rules. A workflow member that is there but mistyped denies.
bounded if "workflow" in object.keys(input)

before_deadline if input.workflow.past_deadline == false

within_step_limit if {
	input.workflow.step > 0
	input.workflow.step <= input.workflow.max_steps
}

# Only refunds spend. What the workflow has spent counts with this amount,
# compared with the room the bound leaves for it, as the caps below are.
within_spend_limit if input.tool != "issue_refund"

within_spend_limit if {
	is_number(input.args.amount)
	input.workflow.spent >= 0
	input.workflow.spent <= input.workflow.max_spend - input.args.amount
}

within_attempt_limit if {
	input.workflow.attempt > 0
	input.workflow.attempt <= input.workflow.max_attempts
}

# R2 also stands for a well-formed order record: one with a status and a
# number paid. Anything less is treated as no order.
order_in_region if {
	input.order.region == input.user.region
	is_string(input.order.status)
	is_number(input.order.paid)
}

# A refund by amount names no line. A line-item refund names a line of the
# order, a whole number of units above zero and at most what is left to
# refund on it, and the amount is the line's unit amount times the
# quantity: the engine prices it from the record, and this holds it to
# that record as it stands at the decision.
line_refundable if not "line" in object.keys(input.args)

line_refundable if {
	some line in input.order.lines
	line.id == input.args.line
	is_number(input.args.quantity)
	round(input.args.quantity) == input.args.quantity
	input.args.quantity > 0
	line.refunded_quantity >= 0
	input.args.quantity <= line.quantity - line.refunded_quantity
	input.args.amount == line.unit_amount * input.args.quantity
}

# A whole number of cents above zero, at most the maximum.
amount_within_max if {
	is_number(input.args.amount)
	round(input.args.amount) == input.args.amount
	input.args.amount > 0
	input.args.amount <= data.countersign.limits.refund_max
}

# The spent totals are compared with the room a limit leaves for this
# amount (limit - amount), so no arithmetic touches an unchecked fact. The
# lower bound refuses null and booleans, which sort below numbers; a string
# sorts above every number and fails the upper bound.

# Refunds already on the order count (here and in R7), so a refund split
# into parts meets the same limits as one refund.
within_amount_paid if {
	input.totals.order_refunded >= 0
	input.totals.order_refunded <= input.order.paid - input.args.amount
}

within_rep_daily_cap if {
	input.totals.rep_day >= 0
	input.totals.rep_day <= data.countersign.limits.rep_daily - input.args.amount
}

within_agent_hourly_cap if {
	input.totals.agent_hour >= 0
	input.totals.agent_hour <= data.countersign.limits.agent_hourly - input.args.amount
}

within_auto_refund if {
	input.totals.order_refunded <= data.countersign.limits.refund_auto - input.args.amount
}

within_reship_auto if input.order.paid <= data.countersign.limits.reship_approval_value

# No reship of this order yet. Only the number 0 passes: null, strings and
# booleans never equal it.
first_reship if input.totals.order_reships == 0
