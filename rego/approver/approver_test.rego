package countersign.approver_test

import data.countersign.approver

# A $400.00 refund on O-1004 requested by rep-ben (US), as in the seed; the
# approval was created at t=100 and lives 900 s.
request := {
	"approver": lead_eli,
	"requester": {"id": "rep-ben", "region": "US"},
	"tool": "issue_refund",
	"amount": 40000,
	"expires": 1000,
	"now": 200,
}

lead_eli := {"id": "lead-eli", "role": "lead", "region": "US", "approve_limit": 50000}

lead_fay := {"id": "lead-fay", "role": "lead", "region": "US", "approve_limit": 10000}

lead_dee := {"id": "lead-dee", "role": "lead", "region": "EU", "approve_limit": 50000}

rep_ben := {"id": "rep-ben", "role": "rep", "region": "US", "approve_limit": 0}

rep_cy := {"id": "rep-cy", "role": "rep", "region": "EU", "approve_limit": 0}

allowed := {"allowed": true}

refused(code) := {"allowed": false, "code": code}

# replace sets one top-level field; object.union would merge nested objects.
replace(obj, key, value) := object.union(object.remove(obj, [key]), {key: value})

verdict_of(request_input) := v if {
	v := approver.verdict with input as request_input
}

# --- the seed's approval-authority table ---

test_seed_requester_cannot_approve if {
	verdict_of(replace(request, "approver", rep_ben)) == refused("requester_cannot_approve")
}

test_seed_not_a_lead if {
	verdict_of(replace(request, "approver", rep_cy)) == refused("approver_not_lead")
}

test_seed_above_approver_limit if {
	verdict_of(replace(request, "approver", lead_fay)) == refused("above_approver_limit")
}

test_seed_outside_region if {
	verdict_of(replace(request, "approver", lead_dee)) == refused("approver_outside_region")
}

test_seed_expired if {
	verdict_of(replace(request, "now", 1100)) == refused("approval_expired")
}

test_seed_right_lead_in_time if {
	verdict_of(request) == allowed
}

# --- boundaries ---

test_expires_at_exactly_now if {
	verdict_of(replace(request, "now", 1000)) == refused("approval_expired")
}

test_one_second_before_expiry if {
	verdict_of(replace(request, "now", 999)) == allowed
}

test_amount_at_approver_limit if {
	verdict_of(replace(request, "amount", 50000)) == allowed
}

test_amount_one_cent_over_approver_limit if {
	verdict_of(replace(request, "amount", 50001)) == refused("above_approver_limit")
}

test_reship_ignores_amount_limit if {
	reship := object.union(replace(request, "approver", lead_fay), {"tool": "reship_order", "amount": 0})
	verdict_of(reship) == allowed
}

# --- missing or mistyped input is refused ---

test_empty_input_refused if {
	verdict_of({}) == refused("requester_cannot_approve")
}

test_missing_requester_refused if {
	verdict_of(object.remove(request, ["requester"])) == refused("requester_cannot_approve")
}

test_missing_role_refused if {
	verdict_of(replace(request, "approver", object.remove(lead_eli, ["role"]))) == refused("approver_not_lead")
}

test_mistyped_times_refused if {
	every bad in [replace(request, "now", "200"), object.remove(request, ["expires"])] {
		verdict_of(bad) == refused("approval_expired")
	}
}

test_missing_regions_refused if {
	no_regions := object.union(
		replace(request, "approver", object.remove(lead_eli, ["region"])),
		{"requester": {"id": "rep-ben"}},
	)
	verdict_of(no_regions) == refused("approver_outside_region")
}

test_mistyped_amount_refused if {
	every amount in ["40000", null] {
		verdict_of(replace(request, "amount", amount)) == refused("above_approver_limit")
	}
}

test_missing_approve_limit_refused if {
	verdict_of(replace(request, "approver", object.remove(lead_eli, ["approve_limit"]))) == refused("above_approver_limit")
}

test_other_tools_refused if {
	every tool in ["lookup_order", "delete_order"] {
		verdict_of(replace(request, "tool", tool)) == refused("above_approver_limit")
	}
}
