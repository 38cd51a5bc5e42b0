package leadpage

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/identity"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
	"github.com/countersign/countersign/sidecar/authn"
)

// queuePage is the queue: a view (what is waiting, or what this person
// decided), its filters, and the approvals in it.
type queuePage struct {
	base
	queueBody
	Refused *refusedAttempt
	// Filters offer the regions and reps of the view, before filtering.
	Regions, Reps []string
	Statuses      []string
}

// queueBody is what the script refreshes in place (GET
// /approvals/fragment): the sections and their cards.
type queueBody struct {
	listing
	Decided bool
	// Mine are pending approvals this person may approve, Apart those
	// they may not (with why), Closed the approvals no longer pending.
	Mine, Apart, Closed []row
	// Fragment is where the script fetches this body again; Refresh how
	// often, in seconds.
	Fragment string
	Refresh  int
	// Back is the listing's query, which each decision form carries so
	// that the answer comes back to the same view.
	Back string
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
	Refundable   string // what is left to refund on the order now; "" when not a refund
	TimeLeft     string
	Call         string
	Previous     *previousCall
	Status       store.ApprovalStatus
	Outcome      string // what became of it, when it is no longer pending
	Approver     string
	Comment      string
	CanApprove   bool
	CanReject    bool
	Code         string // why not, when !CanApprove
	Reason       string
	CSRF         string
	// Label names the request in the buttons' accessible names: "refund
	// of $300.00 on O-1002 for rep-ben".
	Label string
	// Back is the listing's query, carried by the decision form.
	Back string
	// Asked is the decision that asked for the approval; nil when the
	// decision log holds none for it.
	Asked *asked
	// Prior are the refunds already on the order (those counted as
	// spent: done, started or unknown), oldest first.
	Prior []priorRefund
	// AgentReason is the agent's stated reason for the call, from the
	// approval record. It is text the model wrote: shown, escaped, never
	// used to decide.
	AgentReason string
	// Version changes whenever anything shown on the card does: the
	// script keeps a card whose version is unchanged as it is.
	Version string
}

// asked is the decision that asked, as the card shows it.
type asked struct {
	Revision, Digest, DigestShort string
	RepDay                        string // the rep's rolling day when it asked; "" when not recorded
}

// priorRefund is a refund already on the order.
type priorRefund struct {
	Amount, Workflow, User, When string
	N                            int
	This                         bool // the refund of this very approval's step
}

// previousCall is the approval a re-request replaces (after an amendment
// or an expiry): the call the lead was asked about before.
type previousCall struct {
	ID     string
	Status store.ApprovalStatus
	Call   string
}

// renderQueue shows the approvals l selects as v's person sees them, with
// a refused attempt when there is one, under status.
func (p *Page) renderQueue(c echo.Context, v visitor, l listing, status int, refused *refusedAttempt) error {
	body, all, err := p.queueBody(c, v, l)
	if err != nil {
		r := p.explain(err)
		return p.render(c, r.Status, "refused", refusedPage{base: p.base(v), Refusal: r})
	}
	data := queuePage{base: p.base(v), queueBody: body, Refused: refused}
	if data.Notice, err = p.sessions.TakeNotice(c.Request().Context(), v.id); err != nil {
		p.log.Error("taking the notice", "err", err) // the queue is worth more than its notice
	}
	for _, it := range all {
		data.Regions = appendNew(data.Regions, it.RequesterRegion)
		data.Reps = appendNew(data.Reps, it.Requester)
	}
	// A filter keeps its value on offer even when the view holds none.
	data.Regions = appendNew(data.Regions, l.Region)
	data.Reps = appendNew(data.Reps, l.Rep)
	slices.Sort(data.Regions)
	slices.Sort(data.Reps)
	for _, s := range statuses {
		data.Statuses = append(data.Statuses, string(s))
	}
	return p.render(c, status, "queue", data)
}

func appendNew(list []string, s string) []string {
	if s == "" || slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

// fragment is the queue's body alone, for the page's script: 304 when it
// is what the script last had (If-None-Match with the ETag it was sent
// with), so an unchanged queue costs the browser nothing to redraw.
func (p *Page) fragment(c echo.Context, v visitor) error {
	body, _, err := p.queueBody(c, v, parseListing(c.QueryParams()))
	if err != nil {
		r := p.explain(err)
		return c.String(r.Status, r.Code)
	}
	var buf bytes.Buffer
	if err := p.views.pages["queue"].ExecuteTemplate(&buf, "body", body); err != nil {
		return err
	}
	sum := sha256.Sum256(buf.Bytes())
	etag := `"` + hex.EncodeToString(sum[:16]) + `"`
	h := c.Response().Header()
	h.Set("ETag", etag)
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	if c.Request().Header.Get("If-None-Match") == etag {
		return c.NoContent(http.StatusNotModified)
	}
	return c.HTMLBlob(http.StatusOK, buf.Bytes())
}

// queueBody reads the approvals of l for v and sorts them into sections;
// it also returns those of the view before the region and rep filters.
func (p *Page) queueBody(c echo.Context, v visitor, l listing) (queueBody, []engine.ApprovalItem, error) {
	items, err := p.opts.Approvals.ApprovalQueue(c.Request().Context(), v.person(), l.engineQuery(v.who.ID))
	if err != nil {
		return queueBody{}, nil, err
	}
	shown := slices.DeleteFunc(slices.Clone(items), func(it engine.ApprovalItem) bool { return !l.keeps(it) })
	l.order(shown)
	b := queueBody{listing: l, Decided: l.View == viewDecided, Fragment: l.url("/approvals/fragment"),
		Refresh: int(p.opts.Refresh / time.Second), Back: l.query()}
	if b.Refresh < 1 {
		b.Refresh = 1
	}
	now := p.opts.Clock.Now()
	for _, it := range shown {
		r := newRow(it, v, now)
		r.Back = b.Back
		switch {
		case it.Status != store.ApprovalPending:
			b.Closed = append(b.Closed, r)
		case r.CanApprove:
			b.Mine = append(b.Mine, r)
		default:
			b.Apart = append(b.Apart, r)
		}
	}
	return b, items, nil
}

// newRow is item as the page shows it to v at now.
func newRow(it engine.ApprovalItem, v visitor, now time.Time) row {
	r := row{
		ID: it.ID, Workflow: it.Workflow, N: it.N, Summary: it.Summary, Rule: it.Rule,
		Requester: it.Requester, Region: it.RequesterRegion, Ticket: it.Ticket, Customer: it.Customer,
		Paid: it.OrderPaid.String(), Refunded: it.Refunded.String(), Call: describeCall(it.Tool, it.Args),
		Status: it.Status, Approver: it.Approver, Comment: it.Comment,
		CanApprove: it.CanApprove, Code: it.Code, CSRF: v.CSRF, Label: label(it), AgentReason: it.AgentReason,
	}
	if it.Tool == tool.IssueRefund && it.OrderPaid > 0 {
		r.Refundable = max(it.OrderPaid-it.Refunded, 0).String()
	}
	if it.Status == store.ApprovalPending {
		r.TimeLeft = timeLeft(it.Expires.Sub(now))
	} else {
		r.Outcome = outcome(it.Approval, v.who.ID)
	}
	// A lead may reject what is above their own limit (the engine's rule;
	// it refuses anything else it would refuse to approve).
	r.CanReject = it.CanApprove || it.Code == string(policy.AboveApproverLimit)
	if !it.CanApprove && it.Status == store.ApprovalPending {
		r.Reason = reason(it, v.who)
	}
	if prev := it.Previous; prev != nil {
		r.Previous = &previousCall{ID: prev.ID, Status: prev.Status, Call: describeCall(prev.Tool, prev.Args)}
	}
	if a := it.Asked; a != nil {
		r.Asked = &asked{Revision: a.Revision, Digest: a.Digest, DigestShort: shortDigest(a.Digest)}
		if a.Known {
			r.Asked.RepDay = a.RepDay.String()
		}
	}
	for _, o := range it.OrderRefunds {
		r.Prior = append(r.Prior, priorRefund{Amount: o.Amount.String(), Workflow: o.Workflow, N: o.N, User: o.User,
			When: o.ReservedAt.UTC().Format("2006-01-02 15:04 UTC"), This: o.Workflow == it.Workflow && o.N == it.N})
	}
	sum := sha256.Sum256(fmt.Appendf(nil, "%+v %+v %+v %+v", r, r.Previous, r.Asked, r.Prior))
	r.Version = hex.EncodeToString(sum[:8])
	return r
}

// label names an approval's request for a screen reader, in the words a
// lead would use: what, how much, on which order, for whom.
func label(it engine.ApprovalItem) string {
	switch {
	case it.Tool == tool.IssueRefund:
		return fmt.Sprintf("refund of %s on %s for %s", it.Args.Amount, it.Args.Order, it.Requester)
	case it.Tool == tool.ReshipOrder:
		return fmt.Sprintf("reship of %s for %s", it.Args.Order, it.Requester)
	}
	return fmt.Sprintf("%s on %s for %s", it.Tool, it.Args.Order, it.Requester)
}

// outcome says what became of an approval that is no longer pending, to
// the person signed in.
func outcome(a store.Approval, me string) string {
	who := a.Approver
	if who != "" && identity.Same(who, me) {
		who = "you"
	}
	switch a.Status {
	case store.ApprovalApproved:
		return "Approved by " + who + "; it runs at the agent's next resume."
	case store.ApprovalUsed:
		if who == "" {
			return "Used."
		}
		return "Approved by " + who + "; used: the step ran with it."
	case store.ApprovalRejected:
		return "Rejected by " + who + "."
	case store.ApprovalVoid:
		if who == "" {
			return "Void: the call changed before anyone decided."
		}
		return "Approved by " + who + "; void: the call changed (amended or denied) before it ran."
	case store.ApprovalExpired:
		if who == "" {
			return "Expired before anyone decided."
		}
		return "Approved by " + who + "; expired before the step ran."
	}
	return string(a.Status)
}

// shortDigest is a digest as people compare them by eye: its algorithm
// and first 12 hex digits.
func shortDigest(d string) string {
	alg, hexPart, ok := strings.Cut(d, ":")
	if !ok {
		alg, hexPart = "", d
	}
	if len(hexPart) > 12 {
		hexPart = hexPart[:12] + "…"
	}
	if alg != "" {
		return alg + ":" + hexPart
	}
	return hexPart
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
