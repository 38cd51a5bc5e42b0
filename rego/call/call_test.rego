package countersign.call_test

import data.countersign.call

# The limits are the data's: rego/data.json under `opa test rego/`, the
# bundle's data.json when the gate runs these tests. Every boundary below is
# written from them, so a test of "above the auto limit" follows a change of
# refund_auto. A test that needs other limits says so where it is, with
# `with data.countersign.limits as ...`.
limits := data.countersign.limits

# An amount every limit lets through on its own: at most the auto limit.
small := min({3000, limits.refund_auto})

rep_ana := {
	"id": "rep-ana", "role": "rep", "region": "EU",
	"scopes": ["lookup", "refund", "reship"], "refund_ceiling": 50000,
}

rep_cy := {"id": "rep-cy", "role": "rep", "region": "EU", "scopes": ["lookup"], "refund_ceiling": 0}

# The moment every call below is decided, as the engine sends it: its
# clock's time, in RFC 3339 and in nanoseconds since the epoch.
now := {"rfc3339": "2026-12-02T09:00:00Z", "ns": 1796202000000000000}

# Orders placed (and shipped) days before now, as the order system dates them.
placed := {"placed_at": "2026-11-20T10:00:00Z", "shipped_at": "2026-11-22T15:00:00Z"}

orders := {
	"O-1001": object.union(placed, {"id": "O-1001", "region": "EU", "customer": "customer-1", "paid": 12000, "status": "shipped"}),
	"O-1002": object.union(placed, {"id": "O-1002", "region": "EU", "customer": "customer-2", "paid": 48000, "status": "shipped"}),
	"O-1003": object.union(placed, {"id": "O-1003", "region": "US", "customer": "customer-3", "paid": 8000, "status": "shipped"}),
	"O-1005": {"id": "O-1005", "region": "EU", "customer": "customer-5", "paid": 6000, "status": "paid", "placed_at": "2026-11-30T08:00:00Z"},
	# paid above the maximum, so that R4 never masks the refund limits
	"O-9000": object.union(placed, {"id": "O-9000", "region": "EU", "customer": "customer-9", "paid": limits.refund_max + 1, "status": "shipped"}),
}

no_totals := {"order_refunded": 0, "rep_day": 0, "agent_hour": 0, "order_reships": 0}

refund(user, order_id, amount, totals) := {
	"user": user,
	"tool": "issue_refund",
	"args": {"order": order_id, "amount": amount},
	"order": orders[order_id],
	"totals": totals,
	"now": now,
}

reship(order) := {
	"user": rep_ana,
	"tool": "reship_order",
	"args": {"order": order.id},
	"order": order,
	"totals": no_totals,
	"now": now,
}

# replace sets one top-level field; object.union would merge nested objects.
replace(obj, key, value) := object.union(object.remove(obj, [key]), {key: value})

decide(call_input) := d if {
	d := call.decision with input as call_input
}

allow := {"decision": "ALLOW", "rule": "default-allow-after-checks"}

deny(rule) := {"decision": "DENY", "rule": rule}

approval(rule) := {"decision": "REQUIRE_APPROVAL", "rule": rule}

# --- the seed's decision table, at the seed's limits (bundle p1's) ---

seed_limits := {
	"refund_auto": 5000,
	"refund_max": 50000,
	"reship_approval_value": 30000,
	"rep_daily": 100000,
	"rep_window_seconds": 86400,
	"agent_hourly": 300000,
	"approval_ttl_seconds": 900,
	"token_ttl_seconds": 60,
}

decide_seed(call_input) := d if {
	d := call.decision with input as call_input with data.countersign.limits as seed_limits
}

test_seed_small_refund_in_region if {
	decide_seed(refund(rep_ana, "O-1001", 3000, no_totals)) == allow
}

test_seed_above_auto_limit if {
	decide_seed(refund(rep_ana, "O-1002", 12000, no_totals)) == approval("R7-refund-needs-approval")
}

test_seed_above_maximum if {
	decide_seed(refund(rep_ana, "O-1002", 60000, no_totals)) == deny("R3-refund-over-ceiling")
}

test_seed_order_outside_region if {
	decide_seed(refund(rep_ana, "O-1003", 2000, no_totals)) == deny("R2-order-outside-region")
}

test_seed_scope_not_delegated if {
	decide_seed(refund(rep_cy, "O-1003", 2000, no_totals)) == deny("R1-scope-not-delegated")
}

test_seed_more_than_paid if {
	decide_seed(refund(rep_ana, "O-1001", 15000, no_totals)) == deny("R4-exceeds-amount-paid")
}

# --- R0 unknown user ---

test_r0_user_missing if {
	call_input := object.remove(refund(rep_ana, "O-1001", 3000, no_totals), ["user"])
	decide(call_input) == deny("R0-unknown-user")
}

test_r0_user_null if {
	decide(refund(null, "O-1001", 3000, no_totals)) == deny("R0-unknown-user")
}

test_r0_not_a_rep if {
	lead := object.union(rep_ana, {"role": "lead"})
	decide(refund(lead, "O-1001", 3000, no_totals)) == deny("R0-unknown-user")
}

test_r0_incomplete_user if {
	every field in ["id", "region", "scopes"] {
		decide(refund(object.remove(rep_ana, [field]), "O-1001", 3000, no_totals)) == deny("R0-unknown-user")
	}
}

test_r0_empty_id if {
	decide(refund(object.union(rep_ana, {"id": ""}), "O-1001", 3000, no_totals)) == deny("R0-unknown-user")
}

test_r0_scopes_not_a_list if {
	decide(refund(object.union(rep_ana, {"scopes": "refund"}), "O-1001", 3000, no_totals)) == deny("R0-unknown-user")
}

# --- unknown tool, R1 ---

test_unknown_tool_default_deny if {
	call_input := object.union(refund(rep_ana, "O-1001", 3000, no_totals), {"tool": "delete_order"})
	decide(call_input) == deny("default-deny")
}

test_missing_tool_default_deny if {
	call_input := object.remove(refund(rep_ana, "O-1001", 3000, no_totals), ["tool"])
	decide(call_input) == deny("default-deny")
}

test_r1_reship_not_delegated if {
	call_input := replace(reship(orders["O-1001"]), "user", rep_cy)
	decide(call_input) == deny("R1-scope-not-delegated")
}

# --- R2 order ---

test_r2_order_missing if {
	call_input := object.remove(refund(rep_ana, "O-1001", 3000, no_totals), ["order"])
	decide(call_input) == deny("R2-order-outside-region")
}

test_r2_order_null if {
	call_input := replace(refund(rep_ana, "O-1001", 3000, no_totals), "order", null)
	decide(call_input) == deny("R2-order-outside-region")
}

test_r2_malformed_order if {
	bad := [
		object.union(orders["O-1001"], {"paid": "12000"}),
		object.remove(orders["O-1001"], ["status"]),
		object.union(orders["O-1001"], {"region": ""}),
	]
	every order in bad {
		call_input := replace(refund(rep_ana, "O-1001", 3000, no_totals), "order", order)
		decide(call_input) == deny("R2-order-outside-region")
	}
}

test_lookup_in_region_allowed if {
	call_input := replace(reship(orders["O-1001"]), "tool", "lookup_order")
	decide(call_input) == allow
}

test_lookup_outside_region_denied if {
	call_input := replace(reship(orders["O-1003"]), "tool", "lookup_order")
	decide(call_input) == deny("R2-order-outside-region")
}

# --- R3 amount: the maximum needs approval, a cent more is denied ---

test_r3_maximum_needs_approval if {
	decide(refund(rep_ana, "O-9000", limits.refund_max, no_totals)) == approval("R7-refund-needs-approval")
}

test_r3_one_cent_over_maximum if {
	decide(refund(rep_ana, "O-9000", limits.refund_max + 1, no_totals)) == deny("R3-refund-over-ceiling")
}

test_r3_not_positive if {
	every amount in [0, -1] {
		decide(refund(rep_ana, "O-1001", amount, no_totals)) == deny("R3-refund-over-ceiling")
	}
}

test_r3_mistyped_amount if {
	every amount in ["3000", 30.5, null, true, [3000]] {
		decide(refund(rep_ana, "O-1001", amount, no_totals)) == deny("R3-refund-over-ceiling")
	}
}

test_r3_missing_amount if {
	call_input := replace(refund(rep_ana, "O-1001", 3000, no_totals), "args", {"order": "O-1001"})
	decide(call_input) == deny("R3-refund-over-ceiling")
}

test_missing_limits_deny if {
	call_input := refund(rep_ana, "O-1001", small, no_totals)
	d := call.decision with input as call_input with data.countersign.limits as {}
	d == deny("R3-refund-over-ceiling")
}

# --- R4 amount paid: an order paid twice the auto limit, half refunded ---

twice_auto := object.union(orders["O-1001"], {"paid": 2 * limits.refund_auto})

half_refunded := object.union(no_totals, {"order_refunded": limits.refund_auto})

test_r4_exactly_the_remaining_amount if {
	call_input := replace(refund(rep_ana, "O-1001", limits.refund_auto, half_refunded), "order", twice_auto)
	decide(call_input) == approval("R7-refund-needs-approval")
}

test_r4_one_cent_more_than_remaining if {
	call_input := replace(refund(rep_ana, "O-1001", limits.refund_auto + 1, half_refunded), "order", twice_auto)
	decide(call_input) == deny("R4-exceeds-amount-paid")
}

test_r4_whole_order_under_auto_limit if {
	paid_auto := object.union(orders["O-1001"], {"paid": limits.refund_auto})
	call_input := replace(refund(rep_ana, "O-1001", limits.refund_auto, no_totals), "order", paid_auto)
	decide(call_input) == allow
}

test_r4_mistyped_or_missing_totals if {
	every totals in [
		null,
		{"rep_day": 0, "agent_hour": 0},
		object.union(no_totals, {"order_refunded": "0"}),
		object.union(no_totals, {"order_refunded": -1}),
	] {
		decide(refund(rep_ana, "O-1001", 3000, totals)) == deny("R4-exceeds-amount-paid")
	}
}

# --- R5 the rep's rolling day, probed with a refund at the auto limit ---

test_r5_day_lands_exactly_on_cap if {
	totals := object.union(no_totals, {"rep_day": limits.rep_daily - limits.refund_auto})
	decide(refund(rep_ana, "O-9000", limits.refund_auto, totals)) == allow
}

test_r5_day_one_cent_over_cap if {
	totals := object.union(no_totals, {"rep_day": (limits.rep_daily - limits.refund_auto) + 1})
	decide(refund(rep_ana, "O-9000", limits.refund_auto, totals)) == deny("R5-rep-daily-cap")
}

test_r5_mistyped_day_total if {
	every day in ["0", null, false] {
		totals := object.union(no_totals, {"rep_day": day})
		decide(refund(rep_ana, "O-9000", small, totals)) == deny("R5-rep-daily-cap")
	}
}

# --- R6 the agent's hour, probed the same way ---

test_r6_hour_lands_exactly_on_cap if {
	totals := object.union(no_totals, {"agent_hour": limits.agent_hourly - limits.refund_auto})
	decide(refund(rep_ana, "O-9000", limits.refund_auto, totals)) == allow
}

test_r6_hour_one_cent_over_cap if {
	totals := object.union(no_totals, {"agent_hour": (limits.agent_hourly - limits.refund_auto) + 1})
	decide(refund(rep_ana, "O-9000", limits.refund_auto, totals)) == deny("R6-agent-hourly-cap")
}

test_r6_missing_hour_total if {
	decide(refund(rep_ana, "O-9000", small, {"order_refunded": 0, "rep_day": 0})) == deny("R6-agent-hourly-cap")
}

# --- R7 the auto limit, on the cumulative basis ---

test_r7_at_auto_limit_allowed if {
	decide(refund(rep_ana, "O-9000", limits.refund_auto, no_totals)) == allow
}

test_r7_one_cent_over_auto_limit if {
	decide(refund(rep_ana, "O-9000", limits.refund_auto + 1, no_totals)) == approval("R7-refund-needs-approval")
}

# Two refunds, each at most the auto limit, that cross it together.
half_auto := floor(limits.refund_auto / 2)

test_r7_split_refund_counts_prior_refunds if {
	totals := object.union(no_totals, {"order_refunded": half_auto + 1})
	decide(refund(rep_ana, "O-9000", half_auto + 1, totals)) == approval("R7-refund-needs-approval")
}

test_r7_prior_refunds_up_to_auto_limit if {
	totals := object.union(no_totals, {"order_refunded": limits.refund_auto - half_auto})
	decide(refund(rep_ana, "O-9000", half_auto, totals)) == allow
}

# --- R8, R9 reshipment: approval above the reshipment approval value ---

test_r8_not_shipped if {
	decide(reship(orders["O-1005"])) == deny("R8-order-not-shipped")
}

test_r9_paid_at_threshold_allowed if {
	decide(reship(object.union(orders["O-1001"], {"paid": limits.reship_approval_value}))) == allow
}

test_r9_paid_one_cent_over_threshold if {
	decide(reship(object.union(orders["O-1001"], {"paid": limits.reship_approval_value + 1}))) == approval("R9-reship-needs-approval")
}

# --- R10, R11 reships of one order across workflows ---

reshipped(order, n) := replace(reship(order), "totals", object.union(no_totals, {"order_reships": n}))

test_r10_second_reship_needs_approval if {
	decide(reshipped(orders["O-1001"], 1)) == approval("R10-order-already-reshipped")
}

test_r10_second_reship_above_value_still_r10 if {
	decide(reshipped(object.union(orders["O-1001"], {"paid": limits.reship_approval_value + 1}), 1)) == approval("R10-order-already-reshipped")
}

test_r11_third_reship_denied if {
	every n in [2, 3, 100] {
		decide(reshipped(orders["O-1001"], n)) == deny("R11-reship-limit")
	}
}

test_r11_mistyped_reships_denied if {
	every n in ["0", "1", null, false, true, -1, 0.5, [0], {}] {
		decide(reshipped(orders["O-1001"], n)) == deny("R11-reship-limit")
	}
}

test_r11_missing_reships_denied if {
	call_input := replace(reship(orders["O-1001"]), "totals", object.remove(no_totals, ["order_reships"]))
	decide(call_input) == deny("R11-reship-limit")
}

test_r11_missing_totals_denied if {
	decide(object.remove(reship(orders["O-1001"]), ["totals"])) == deny("R11-reship-limit")
}

test_r8_not_shipped_before_reship_count if {
	decide(reshipped(orders["O-1005"], 2)) == deny("R8-order-not-shipped")
}

test_r9_first_reship_keeps_its_meaning if {
	decide(reshipped(object.union(orders["O-1001"], {"paid": limits.reship_approval_value + 1}), 0)) == approval("R9-reship-needs-approval")
}

test_refund_ignores_reship_count if {
	totals := object.union(no_totals, {"order_reships": 5})
	decide(refund(rep_ana, "O-1001", small, totals)) == allow
}

# --- R12: line-item refunds (the seed's $12 add-on beside an annual plan,
# priced a dollar above the auto limit) ---

plan_price := limits.refund_auto + 100

plan_and_addon := object.union(orders["O-1001"], {"paid": plan_price + 2400, "lines": [
	{"id": "L1", "sku": "QF-PLAN-ANNUAL", "description": "annual plan", "unit_amount": plan_price, "quantity": 1, "refunded_quantity": 0},
	{"id": "L2", "sku": "QF-ADDON", "description": "add-on", "unit_amount": 1200, "quantity": 2, "refunded_quantity": 1},
]})

line_refund(line, quantity, amount) := {
	"user": rep_ana,
	"tool": "issue_refund",
	"args": {"order": "O-1001", "amount": amount, "line": line, "quantity": quantity},
	"order": plan_and_addon,
	"totals": no_totals,
	"now": now,
}

test_line_refund_of_what_is_left_is_allowed if {
	decide(line_refund("L2", 1, 1200)) == allow
}

test_line_refund_is_weighed_like_its_amount if {
	decide(line_refund("L1", 1, plan_price)) == approval("R7-refund-needs-approval")
}

test_line_refund_beyond_what_is_left_is_denied if {
	decide(line_refund("L2", 2, 2400)) == deny("R12-line-not-refundable")
}

test_line_refund_of_a_line_the_order_lacks_is_denied if {
	decide(line_refund("L9", 1, 1200)) == deny("R12-line-not-refundable")
}

test_line_refund_at_another_price_is_denied if {
	decide(line_refund("L1", 1, 1200)) == deny("R12-line-not-refundable")
}

test_line_refund_unpriced_is_denied if {
	decide(line_refund("L9", 1, 0)) == deny("R12-line-not-refundable")
}

test_line_refund_with_a_mistyped_quantity_is_denied if {
	every q in [0, -1, 1.5, "1", null, true] {
		decide(line_refund("L2", q, 1200)) == deny("R12-line-not-refundable")
	}
}

test_line_refund_on_an_order_without_lines_is_denied if {
	decide(replace(line_refund("L1", 1, plan_price), "order", orders["O-1001"])) == deny("R12-line-not-refundable")
}

test_line_refund_with_a_mistyped_refunded_quantity_is_denied if {
	bad := object.union(plan_and_addon, {"lines": [{"id": "L2", "unit_amount": 1200, "quantity": 2, "refunded_quantity": null}]})
	decide(replace(line_refund("L2", 1, 1200), "order", bad)) == deny("R12-line-not-refundable")
}

test_refund_by_amount_needs_no_line if {
	decide(replace(line_refund("L2", 1, 1200), "args", {"order": "O-1001", "amount": 1200})) == allow
}

test_line_refund_with_a_null_line_is_denied if {
	decide(line_refund(null, 1, 1200)) == deny("R12-line-not-refundable")
}

# --- B1-B4: the bounds of the workflow a call is in ---

# within is a workflow with room on every bound.
within := {
	"step": 2, "max_steps": 3, "spent": 4000, "max_spend": 5000,
	"past_deadline": false, "attempt": 1, "max_attempts": 5,
}

bounded_refund(amount, workflow) := object.union(refund(rep_ana, "O-1001", amount, no_totals), {"workflow": workflow})

test_bounds_within_every_bound_decide_as_before if {
	decide(bounded_refund(1000, within)) == allow
	decide(replace(reship(orders["O-1001"]), "workflow", within)) == allow
}

test_bounds_absent_do_not_apply if {
	decide(refund(rep_ana, "O-1001", small, no_totals)) == allow
}

test_b3_past_the_deadline_denies_any_tool if {
	late := object.union(within, {"past_deadline": true})
	decide(bounded_refund(1000, late)) == deny("B3-workflow-deadline")
	decide(replace(reship(orders["O-1001"]), "workflow", late)) == deny("B3-workflow-deadline")
}

test_b3_comes_before_the_other_bounds if {
	decide(bounded_refund(1000, object.union(within, {"past_deadline": true, "step": 9, "attempt": 9}))) == deny("B3-workflow-deadline")
}

test_b1_a_step_above_max_steps_denies if {
	decide(bounded_refund(1000, object.union(within, {"step": 4}))) == deny("B1-workflow-step-limit")
	decide(bounded_refund(1000, object.union(within, {"step": 3}))) == allow
}

test_b2_a_refund_crossing_max_spend_denies if {
	decide(bounded_refund(1001, within)) == deny("B2-workflow-spend-limit")
}

test_b2_a_refund_landing_on_max_spend_is_allowed if {
	decide(bounded_refund(1000, within)) == allow
}

test_b2_does_not_bound_a_reship if {
	spent := object.union(within, {"spent": 5000})
	decide(replace(reship(orders["O-1001"]), "workflow", spent)) == allow
}

test_b2_comes_before_r3 if {
	decide(bounded_refund(60000, within)) == deny("B2-workflow-spend-limit")
}

test_b4_an_attempt_above_max_attempts_denies if {
	decide(bounded_refund(1000, object.union(within, {"attempt": 6}))) == deny("B4-attempt-limit")
	decide(bounded_refund(1000, object.union(within, {"attempt": 5}))) == allow
}

test_bounds_mistyped_workflow_denies if {
	decide(bounded_refund(1000, null)) == deny("B3-workflow-deadline")
	decide(bounded_refund(1000, object.union(within, {"past_deadline": "no"}))) == deny("B3-workflow-deadline")
	decide(bounded_refund(1000, object.union(within, {"step": "2"}))) == deny("B1-workflow-step-limit")
	decide(bounded_refund(1000, object.union(within, {"step": 0}))) == deny("B1-workflow-step-limit")
	decide(bounded_refund(1000, object.union(within, {"spent": null}))) == deny("B2-workflow-spend-limit")
	decide(bounded_refund(1000, object.union(within, {"spent": -1}))) == deny("B2-workflow-spend-limit")
	decide(bounded_refund("1000", within)) == deny("B2-workflow-spend-limit")
	decide(bounded_refund(1000, object.union(within, {"attempt": null}))) == deny("B4-attempt-limit")
}
