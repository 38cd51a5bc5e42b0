# Package countersign.approver decides whether a person may approve a call
# that policy held for approval.
#
# `verdict` is {"allowed": true} or {"allowed": false, "code": C} where C is
# the first refusal that matches, in the order below, and is the error code
# the API returns. As in countersign.call, each refusal is `not <positive
# predicate>`, so missing or mistyped input is refused.
#
# Times are unix seconds; amounts are integer cents.
package countersign.approver

verdict := refused("requester_cannot_approve") if {
	not someone_else
} else := refused("approver_not_lead") if {
	not lead
} else := refused("approval_expired") if {
	not unexpired
} else := refused("approver_outside_region") if {
	not same_region
} else := refused("above_approver_limit") if {
	not within_approve_limit
} else := {"allowed": true}

refused(code) := {"allowed": false, "code": code}

# Nobody approves their own request.
someone_else if {
	non_empty_string(input.approver.id)
	non_empty_string(input.requester.id)
	input.approver.id != input.requester.id
}

lead if input.approver.role == "lead"

unexpired if {
	is_number(input.now)
	is_number(input.expires)
	input.now < input.expires
}

same_region if {
	non_empty_string(input.approver.region)
	input.approver.region == input.requester.region
}

# A lead's limit bounds the refunds they approve. A reshipment moves no
# money, so any lead of the region may approve it; any other tool never
# needs an approval and is refused.
within_approve_limit if input.tool == "reship_order"

within_approve_limit if {
	input.tool == "issue_refund"
	is_number(input.amount)
	is_number(input.approver.approve_limit)
	input.amount <= input.approver.approve_limit
}

non_empty_string(s) if {
	is_string(s)
	s != ""
}
