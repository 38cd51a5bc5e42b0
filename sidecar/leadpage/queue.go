package leadpage

import (
	"fmt"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
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
	list, err := p.opts.Approvals.Approvals(c.Request().Context(), store.ApprovalPending)
	if err != nil {
		r := p.explain(err)
		return p.render(c, r.Status, "refused", refusedPage{base: p.base(v), Refusal: r})
	}
	data := queuePage{base: p.base(v), Refused: refused}
	data.Notice = p.sessions.takeNotice(v.id)
	now := p.opts.Clock.Now()
	for _, a := range list {
		r := row{
			ID: a.ID, Workflow: a.Workflow, N: a.N, Summary: a.Summary,
			Requester: a.Requester, Region: a.RequesterRegion,
			Paid: "—", Refunded: "—",
			TimeLeft: timeLeft(a.Expires.Sub(now)), Call: describeCall(a.Tool, a.Args),
			CanApprove: true, CanReject: true, CSRF: v.csrf,
		}
		data.Mine = append(data.Mine, r)
	}
	return p.render(c, status, "queue", data)
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
