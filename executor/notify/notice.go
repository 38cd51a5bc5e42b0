package notify

import (
	"fmt"
	"strings"
	"time"

	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

// Event names what happened to an approval.
type Event string

// The events, one per status an approval enters.
const (
	Requested Event = "approval_requested"
	Approved  Event = "approval_approved"
	Rejected  Event = "approval_rejected"
	Expired   Event = "approval_expired"
	Void      Event = "approval_void"
	Used      Event = "approval_used"
)

// events maps each approval status to the event of entering it.
var events = map[store.ApprovalStatus]Event{
	store.ApprovalPending:  Requested,
	store.ApprovalApproved: Approved,
	store.ApprovalRejected: Rejected,
	store.ApprovalExpired:  Expired,
	store.ApprovalVoid:     Void,
	store.ApprovalUsed:     Used,
}

// Notice is the body of one post (API.md, third wave).
type Notice struct {
	// Text is what a Slack-compatible incoming webhook displays: the call
	// in dollars, the order, the rep, the rule and the link.
	Text     string   `json:"text"`
	Event    Event    `json:"event"`
	Approval Approval `json:"approval"`
	// URL is the lead's page, at the approval's card.
	URL string `json:"url"`
}

// Approval is the approval as the notice shows it: the fields of the
// API's approval view a receiver needs, with the call's amount and order
// beside its args so that a receiver need not know each tool's args.
type Approval struct {
	ID        string               `json:"id"`
	Workflow  string               `json:"workflow"`
	N         int                  `json:"n"`
	Tool      tool.Name            `json:"tool"`
	Args      Args                 `json:"args"`
	Summary   string               `json:"summary"`
	Requester string               `json:"requester"`
	Approver  string               `json:"approver,omitempty"`
	Comment   string               `json:"comment,omitempty"`
	Status    store.ApprovalStatus `json:"status"`
	Expires   time.Time            `json:"expires"`
	Rule      string               `json:"rule,omitempty"`
	// Amount is a refund's amount in cents; absent for other tools.
	Amount *money.Cents `json:"amount,omitempty"`
	Order  string       `json:"order"`
	// OrderPaid is what the order was paid, in cents, when the approval
	// was requested (absent when it was not known).
	OrderPaid   money.Cents `json:"order_paid,omitempty"`
	Retroactive bool        `json:"retroactive,omitempty"`
}

// Args are the call's arguments in the shape of the API's args: a
// refund's amount is shown even if zero, and no other tool shows one.
type Args struct {
	Order    string       `json:"order"`
	Amount   *money.Cents `json:"amount,omitempty"`
	Line     string       `json:"line,omitempty"`
	Quantity int64        `json:"quantity,omitempty"`
}

// newNotice is the notice of a entering its status, with link the lead's
// page for it. ok is false for a status that has no event.
func newNotice(a store.Approval, link string) (n Notice, ok bool) {
	ev, ok := events[a.Status]
	if !ok {
		return Notice{}, false
	}
	v := Approval{ID: a.ID, Workflow: a.Workflow, N: a.N, Tool: a.Tool, Args: Args{Order: a.Args.Order},
		Summary: a.Summary, Requester: a.Requester, Approver: a.Approver, Comment: a.Comment, Status: a.Status,
		Expires: a.Expires.UTC(), Rule: a.Rule, Order: a.Args.Order, OrderPaid: a.OrderPaid, Retroactive: a.Retroactive}
	if a.Tool == tool.IssueRefund {
		amount := a.Args.Amount
		v.Amount, v.Args.Amount, v.Args.Line, v.Args.Quantity = &amount, &amount, a.Args.Line, a.Args.Quantity
	}
	return Notice{Text: text(ev, a, link), Event: ev, Approval: v, URL: link}, true
}

// text is the one line a chat shows. Every value from a record is escaped
// as Slack asks (&, <, >), so none can forge a link or a mention.
func text(ev Event, a store.Approval, link string) string {
	call := callText(a) + ", asked by " + esc(a.Requester)
	if a.Rule != "" {
		call += " (rule " + esc(a.Rule) + ")"
	}
	id, by := esc(a.ID), esc(a.Approver)
	var line string
	switch ev {
	case Requested:
		line = fmt.Sprintf("Approval requested, %s: %s; expires %s", id, call, a.Expires.UTC().Format("Jan 2 15:04 UTC"))
	case Approved:
		line = fmt.Sprintf("%s approved by %s: %s", id, by, call)
	case Rejected:
		line = fmt.Sprintf("%s rejected by %s: %s", id, by, call)
	case Expired:
		line = fmt.Sprintf("%s expired unanswered: %s", id, call)
	case Void:
		line = fmt.Sprintf("%s is void (the call changed or no longer needs it): %s", id, call)
	case Used:
		line = fmt.Sprintf("%s used, the approved call went ahead: %s", id, call)
		if a.Retroactive {
			line = fmt.Sprintf("%s ratified after execution by %s: %s", id, by, call)
		}
	}
	return line + ". " + link
}

// callText is the call in words, its amounts in dollars.
func callText(a store.Approval) string {
	switch a.Tool {
	case tool.IssueRefund:
		return fmt.Sprintf("refund %s on order %s", a.Args.Amount, esc(a.Args.Order))
	case tool.ReshipOrder:
		if a.OrderPaid > 0 {
			return fmt.Sprintf("reship order %s (paid %s)", esc(a.Args.Order), a.OrderPaid)
		}
		return "reship order " + esc(a.Args.Order)
	default:
		return fmt.Sprintf("%s on order %s", esc(string(a.Tool)), esc(a.Args.Order))
	}
}

// esc escapes the three characters Slack's message text gives meaning to.
var esc = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace
