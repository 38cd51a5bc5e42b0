package leadpage

import (
	"fmt"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
	"github.com/countersign/countersign/sidecar/authn"
)

// queuePage is the queue: what this person may approve, and apart from it
// what they may not, each with the reason.
type queuePage struct {
	base
	Mine    []row
	Apart   []row
	Refused *refusedAttempt
}

// refusedAttempt is an approval or rejection the engine refused.
type refusedAttempt struct {
	Refusal
	ID   string
	Verb string
}

// row is one approval as the page shows it. Amounts are formatted as
// dollars here, for display only.
type row struct {
	ID, Workflow string
	N            int
	Summary      string
	Rule         string
	Requester    string
	Region       string
	Ticket       string
	Customer     string
	Paid         string
	Refunded     string
	TimeLeft     string
	Call         string
	Previous     *previousCall
	CanApprove   bool
	CanReject    bool
	Code         string // why not, when !CanApprove
	Reason       string
	CSRF         string
}

// previousCall is the approval a re-request replaces (after an amendment
// or an expiry): the call the lead was asked about before.
type previousCall struct {
	ID     string
	Status store.ApprovalStatus
	Call   string
}

// renderQueue shows the pending approvals as v's person sees them, with a
// refused attempt when there is one, under status.
func (p *Page) renderQueue(c echo.Context, v visitor, status int, refused *refusedAttempt) error {
	items, err := p.opts.Approvals.ApprovalQueue(c.Request().Context(), v.person(),
		engine.ApprovalQuery{Status: store.ApprovalPending, All: true})
	if err != nil {
		r := p.explain(err)
		return p.render(c, r.Status, "refused", refusedPage{base: p.base(v), Refusal: r})
	}
	data := queuePage{base: p.base(v), Refused: refused}
	if data.Notice, err = p.sessions.TakeNotice(c.Request().Context(), v.id); err != nil {
		p.log.Error("taking the notice", "err", err) // the queue is worth more than its notice
	}
	now := p.opts.Clock.Now()
	for _, it := range items {
		r := newRow(it, v, now)
		if r.CanApprove {
			data.Mine = append(data.Mine, r)
		} else {
			data.Apart = append(data.Apart, r)
		}
	}
	return p.render(c, status, "queue", data)
}

// newRow is item as the page shows it to v at now.
func newRow(it engine.ApprovalItem, v visitor, now time.Time) row {
	r := row{
		ID: it.ID, Workflow: it.Workflow, N: it.N, Summary: it.Summary, Rule: it.Rule,
		Requester: it.Requester, Region: it.RequesterRegion, Ticket: it.Ticket, Customer: it.Customer,
		Paid: it.OrderPaid.String(), Refunded: it.Refunded.String(),
		TimeLeft: timeLeft(it.Expires.Sub(now)), Call: describeCall(it.Tool, it.Args),
		CanApprove: it.CanApprove, Code: it.Code, CSRF: v.CSRF,
	}
	// A lead may reject what is above their own limit (the engine's rule;
	// it refuses anything else it would refuse to approve).
	r.CanReject = it.CanApprove || it.Code == string(policy.AboveApproverLimit)
	if !it.CanApprove {
		r.Reason = reason(it, v.who)
	}
	if prev := it.Previous; prev != nil {
		r.Previous = &previousCall{ID: prev.ID, Status: prev.Status, Call: describeCall(prev.Tool, prev.Args)}
	}
	return r
}

// reason says, for the person signed in, why they may not approve it.
func reason(it engine.ApprovalItem, who authn.Principal) string {
	switch policy.Refusal(it.Code) {
	case engine.ForbiddenRole:
		return "Only a lead decides; you are signed in as " + who.Role + " and see the queue read-only."
	case policy.RequesterCannotApprove:
		return "Your own request: another lead of the region must decide."
	case policy.ApproverNotLead:
		return "Only a lead decides; you are signed in as " + who.Role + " and see the queue read-only."
	case policy.ApproverOutsideRegion:
		return "Another region: requested in " + it.RequesterRegion + ", you approve for " + who.Region + "."
	case policy.AboveApproverLimit:
		return "Above your limit: " + it.Args.Amount.String() + " is more than the " + who.ApproveLimit.String() +
			" you may approve. You may still reject it."
	case policy.ApprovalExpired:
		return "Expired: the agent's next resume requests a new approval."
	}
	if it.Code == engine.CodeNotPending {
		return "No longer pending."
	}
	return "The approver rules refuse it."
}

// describeCall is a call in one line: what the lead is asked to allow.
func describeCall(name tool.Name, a tool.Args) string {
	switch {
	case name == tool.IssueRefund && a.IsLine():
		return fmt.Sprintf("%s %s on order %s (line %s × %d)", name, a.Amount, a.Order, a.Line, a.Quantity)
	case name == tool.IssueRefund:
		return fmt.Sprintf("%s %s on order %s", name, a.Amount, a.Order)
	}
	return fmt.Sprintf("%s order %s", name, a.Order)
}

// timeLeft is the time until an approval expires, to the minute.
func timeLeft(d time.Duration) string {
	switch {
	case d <= 0:
		return "expired"
	case d < time.Minute:
		return "under a minute"
	}
	return fmt.Sprintf("%d min", int(d/time.Minute))
}

// noticeFor is the notice shown after a lead's decision.
func noticeFor(a store.Approval) string {
	what := "Approved"
	if a.Status == store.ApprovalRejected {
		what = "Rejected"
	}
	return fmt.Sprintf("%s %s: %s. The step runs (or is denied) at the agent's next resume.", what, a.ID, a.Summary)
}
