package policy

import (
	"time"

	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/tool"
)

// The pinned boundary-case suite of the gate. It lives here, in Go, and not
// in bundles: a bundle author can change a bundle's rules, data and tests,
// but not the cases a bundle must answer to be activated.
//
// The numbers are the company's rules in cents (the limits of bundle p1's
// data.json), not a bundle's data. Every limit is probed where a units mistake shows: the auto limit
// and the maximum each on both sides. The refund cases use an order paid
// $1,000.00 so that R4 never hides a refund limit.
//
// The cumulative basis of R7 (prior $30 + $30) is pinned only through R4
// here: a pinned R7 split case would also fail bundle p2, whose rejection
// must list exactly three cases ($51.00 and $500.00 allowed where approval
// is required, $501.00 allowed where it is denied). The Rego tests cover it.

type callCase struct {
	name   string
	user   *User
	tool   tool.Name
	order  Order
	totals Totals
	amount money.Cents
	want   Decision
	rule   string
}

func (c callCase) input() Input {
	o := c.order
	return Input{
		User:   c.user,
		Tool:   c.tool,
		Args:   tool.Args{Order: o.ID, Amount: c.amount},
		Order:  &o,
		Totals: c.totals,
	}
}

type approverCase struct {
	name string
	in   ApproverInput
	want Refusal
}

var (
	pinnedRep = &User{ID: "rep-ana", Role: "rep", Region: "EU",
		Scopes: []string{"lookup", "refund", "reship"}, RefundCeiling: 50000}
	pinnedReadOnly = &User{ID: "rep-cy", Role: "rep", Region: "EU", Scopes: []string{"lookup"}}

	paidEnough  = Order{ID: "O-9001", Region: "EU", Customer: "customer-9", Paid: 100000, Status: "shipped"}
	paid40      = Order{ID: "O-9002", Region: "EU", Customer: "customer-9", Paid: 4000, Status: "shipped"}
	paid300     = Order{ID: "O-9003", Region: "EU", Customer: "customer-9", Paid: 30000, Status: "shipped"}
	paid30001   = Order{ID: "O-9004", Region: "EU", Customer: "customer-9", Paid: 30001, Status: "shipped"}
	notShipped  = Order{ID: "O-9005", Region: "EU", Customer: "customer-9", Paid: 6000, Status: "paid"}
	otherRegion = Order{ID: "O-9006", Region: "US", Customer: "customer-9", Paid: 8000, Status: "shipped"}
)

const (
	allowRule = "default-allow-after-checks"
	r7        = "R7-refund-needs-approval"
)

var callCases = []callCase{
	{name: "refund $30.00 under the auto limit", user: pinnedRep, tool: tool.IssueRefund, order: paidEnough, amount: 3000, want: Allow, rule: allowRule},
	{name: "refund at the auto limit", user: pinnedRep, tool: tool.IssueRefund, order: paidEnough, amount: 5000, want: Allow, rule: allowRule},
	{name: "refund above the auto limit", user: pinnedRep, tool: tool.IssueRefund, order: paidEnough, amount: 5100, want: RequireApproval, rule: r7},
	{name: "refund at the maximum", user: pinnedRep, tool: tool.IssueRefund, order: paidEnough, amount: 50000, want: RequireApproval, rule: r7},
	{name: "refund above the maximum", user: pinnedRep, tool: tool.IssueRefund, order: paidEnough, amount: 50100, want: Deny, rule: "R3-refund-over-ceiling"},
	{name: "refund of nothing", user: pinnedRep, tool: tool.IssueRefund, order: paidEnough, amount: 0, want: Deny, rule: "R3-refund-over-ceiling"},
	{name: "unknown user", user: nil, tool: tool.IssueRefund, order: paidEnough, amount: 3000, want: Deny, rule: "R0-unknown-user"},
	{name: "unknown tool", user: pinnedRep, tool: "delete_order", order: paidEnough, amount: 3000, want: Deny, rule: "default-deny"},
	{name: "refund scope not delegated", user: pinnedReadOnly, tool: tool.IssueRefund, order: paidEnough, amount: 3000, want: Deny, rule: "R1-scope-not-delegated"},
	{name: "order outside the rep's region", user: pinnedRep, tool: tool.IssueRefund, order: otherRegion, amount: 2000, want: Deny, rule: "R2-order-outside-region"},
	{name: "refund of exactly what was paid", user: pinnedRep, tool: tool.IssueRefund, order: paid40, amount: 4000, want: Allow, rule: allowRule},
	{name: "refund over what was paid", user: pinnedRep, tool: tool.IssueRefund, order: paid40, amount: 4001, want: Deny, rule: "R4-exceeds-amount-paid"},
	{name: "prior refunds count toward what was paid", user: pinnedRep, tool: tool.IssueRefund, order: paid40, totals: Totals{OrderRefunded: 3000}, amount: 1001, want: Deny, rule: "R4-exceeds-amount-paid"},
	{name: "rep day lands on the cap", user: pinnedRep, tool: tool.IssueRefund, order: paidEnough, totals: Totals{RepDay: 95000}, amount: 5000, want: Allow, rule: allowRule},
	{name: "rep day over the cap", user: pinnedRep, tool: tool.IssueRefund, order: paidEnough, totals: Totals{RepDay: 95001}, amount: 5000, want: Deny, rule: "R5-rep-daily-cap"},
	{name: "agent hour lands on the cap", user: pinnedRep, tool: tool.IssueRefund, order: paidEnough, totals: Totals{AgentHour: 295000}, amount: 5000, want: Allow, rule: allowRule},
	{name: "agent hour over the cap", user: pinnedRep, tool: tool.IssueRefund, order: paidEnough, totals: Totals{AgentHour: 295001}, amount: 5000, want: Deny, rule: "R6-agent-hourly-cap"},
	{name: "reship an order not shipped", user: pinnedRep, tool: tool.ReshipOrder, order: notShipped, want: Deny, rule: "R8-order-not-shipped"},
	{name: "reship an order paid $300.00", user: pinnedRep, tool: tool.ReshipOrder, order: paid300, want: Allow, rule: allowRule},
	{name: "reship an order paid over $300.00", user: pinnedRep, tool: tool.ReshipOrder, order: paid30001, want: RequireApproval, rule: "R9-reship-needs-approval"},
	{name: "reship an order reshipped once before", user: pinnedRep, tool: tool.ReshipOrder, order: paid300, totals: Totals{OrderReships: 1}, want: RequireApproval, rule: "R10-order-already-reshipped"},
	{name: "reship an order reshipped twice before", user: pinnedRep, tool: tool.ReshipOrder, order: paid300, totals: Totals{OrderReships: 2}, want: Deny, rule: "R11-reship-limit"},
	{name: "look up an order in region", user: pinnedRep, tool: tool.LookupOrder, order: paidEnough, want: Allow, rule: allowRule},
}

// The approval-authority cases: a $400.00 refund requested by rep-ben (US),
// approved by each person in turn; only a US lead whose limit covers it,
// within the 15 minutes, may approve.
var (
	approvalCreated = time.Unix(1_700_000_000, 0).UTC()
	approvalExpires = approvalCreated.Add(15 * time.Minute)
	approvalNow     = approvalCreated.Add(time.Minute)
	requesterBen    = Requester{ID: "rep-ben", Region: "US"}
	leadEli         = Approver{ID: "lead-eli", Role: "lead", Region: "US", ApproveLimit: 50000}
)

func approval(a Approver, amount money.Cents, now time.Time) ApproverInput {
	return ApproverInput{Approver: a, Requester: requesterBen, Tool: tool.IssueRefund, Amount: amount, Expires: approvalExpires, Now: now}
}

var approverCases = []approverCase{
	{name: "approve as the requester", in: approval(Approver{ID: "rep-ben", Role: "rep", Region: "US"}, 40000, approvalNow), want: RequesterCannotApprove},
	{name: "approve as a rep", in: approval(Approver{ID: "rep-cy", Role: "rep", Region: "EU"}, 40000, approvalNow), want: ApproverNotLead},
	{name: "approve above the lead's limit", in: approval(Approver{ID: "lead-fay", Role: "lead", Region: "US", ApproveLimit: 10000}, 40000, approvalNow), want: AboveApproverLimit},
	{name: "approve from another region", in: approval(Approver{ID: "lead-dee", Role: "lead", Region: "EU", ApproveLimit: 50000}, 40000, approvalNow), want: ApproverOutsideRegion},
	{name: "approve after 1000 s", in: approval(leadEli, 40000, approvalCreated.Add(1000*time.Second)), want: ApprovalExpired},
	{name: "approve at the expiry", in: approval(leadEli, 40000, approvalExpires), want: ApprovalExpired},
	{name: "approve at the lead's limit in time", in: approval(leadEli, 50000, approvalNow), want: ""},
}
