package sidecar

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"time"

	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/impact"
	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/review"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

// The JSON shapes of the answers (sidecar/openapi.json). Field names are the contract; the OpenAPI
// test compares each answer's fields with openapi.json. The views are
// built from store records rather than being the records themselves, so
// that a field added to a record for the engine's sake (a delegation, an
// idempotency key) never leaks into an answer.

// workflowView is a workflow, with its steps when it is read.
type workflowView struct {
	ID             string               `json:"id"`
	Ticket         string               `json:"ticket"`
	User           string               `json:"user"`
	Status         store.WorkflowStatus `json:"status"`
	PolicyRevision string               `json:"policy_revision"`
	Created        time.Time            `json:"created"`
	Updated        time.Time            `json:"updated"`
	AgentVersion   string               `json:"agent_version,omitempty"`
	Bounds         *boundsView          `json:"bounds,omitempty"`
	// Steps is absent when a workflow is created (nil) and a list, [] for
	// none, when it is read: omitzero, unlike omitempty, keeps the [].
	Steps []stepView `json:"steps,omitzero"`
}

// stepView is one step. Decision and rule are shown even when empty.
type stepView struct {
	Workflow    string            `json:"workflow"`
	N           int               `json:"n"`
	Tool        tool.Name         `json:"tool"`
	Args        argsView          `json:"args"`
	Status      store.StepStatus  `json:"status"`
	Decision    string            `json:"decision"`
	Rule        string            `json:"rule"`
	Approval    *stepApprovalView `json:"approval,omitempty"`
	Result      json.RawMessage   `json:"result,omitempty"`
	Note        string            `json:"note,omitempty"`
	DuplicateOf int               `json:"duplicate_of,omitempty"`
	// ResolveAfter is shown on a step whose effect may still land
	// (started or unknown): the engine resolves it after then.
	ResolveAfter *time.Time `json:"resolve_after,omitempty"`
	// Reason is shown on a step denied, waiting for an approval or held:
	// the fact that decided and what the agent can do next.
	Reason *reasonView `json:"reason,omitempty"`
	// ApprovalComment is the comment of the lead who rejected the step's
	// approval.
	ApprovalComment string `json:"approval_comment,omitempty"`
	// AgentReason is why the agent said it made the call.
	AgentReason string `json:"agent_reason,omitempty"`
}

// reasonView is why a step did not run and what can be done next. Facts
// holds the numbers the text states: cents as integers, ids.
type reasonView struct {
	Text  string         `json:"text"`
	Facts map[string]any `json:"facts,omitempty"`
	Next  string         `json:"next"`
}

// deniedStepView is a denied step with the error that says why.
type deniedStepView struct {
	stepView
	Error apiError `json:"error"`
}

// stepApprovalView is the approval a step waits on or ran under.
type stepApprovalView struct {
	ID      string               `json:"id"`
	Status  store.ApprovalStatus `json:"status"`
	Summary string               `json:"summary"`
	Expires time.Time            `json:"expires"`
}

// argsView shows exactly the fields of the tool's schema: a refund's amount
// is shown even if zero, and no other tool shows one; a line-item refund
// shows its line and quantity too.
type argsView struct {
	Order    string       `json:"order"`
	Amount   *money.Cents `json:"amount,omitempty"`
	Line     string       `json:"line,omitempty"`
	Quantity int64        `json:"quantity,omitempty"`
}

// approvalView is one approval request.
type approvalView struct {
	ID          string               `json:"id"`
	Workflow    string               `json:"workflow"`
	N           int                  `json:"n"`
	Tool        tool.Name            `json:"tool"`
	Args        argsView             `json:"args"`
	Summary     string               `json:"summary"`
	Requester   string               `json:"requester"`
	Approver    string               `json:"approver,omitempty"`
	Status      store.ApprovalStatus `json:"status"`
	Comment     string               `json:"comment,omitempty"`
	Retroactive bool                 `json:"retroactive,omitempty"`
	Created     time.Time            `json:"created"`
	Expires     time.Time            `json:"expires"`
	CallHash    string               `json:"call_hash"`
	Rule        string               `json:"rule,omitempty"`
	Ticket      string               `json:"ticket,omitempty"`
	Customer    string               `json:"customer,omitempty"`
	OrderPaid   money.Cents          `json:"order_paid,omitempty"`
	// AgentReason is why the agent said it made the call: its own words,
	// for the lead to weigh; the policy never saw them.
	AgentReason string `json:"agent_reason,omitempty"`
	// The rest are a reviewer's: on the queue and on GET of one approval.
	OrderRefunded *money.Cents  `json:"order_refunded,omitempty"`
	Replaces      *replacedView `json:"replaces,omitempty"`
	CanApprove    *bool         `json:"can_approve,omitempty"`
	Code          string        `json:"code,omitempty"`
}

// replacedView is the earlier approval of a step, whose call the new one
// replaced.
type replacedView struct {
	ID       string               `json:"id"`
	Args     argsView             `json:"args"`
	Status   store.ApprovalStatus `json:"status"`
	CallHash string               `json:"call_hash"`
}

// approvalsAnswer is the approval queue; [] when it is empty.
type approvalsAnswer struct {
	Approvals []approvalView `json:"approvals"`
}

// decisionsAnswer is one page of the decision log, each decision in the
// shape of OPA's decision log; [] when the page is empty. NextCursor is the
// cursor of the next page, "" when nothing follows.
type decisionsAnswer struct {
	Decisions  []engine.LogEntry `json:"decisions"`
	NextCursor string            `json:"next_cursor"`
}

// bundleView is one bundle activation attempt. Failures is null, not [],
// for a record stored without any, as it always has been.
type bundleView struct {
	Seq          uint64              `json:"seq"`
	Revision     string              `json:"revision"`
	Digest       string              `json:"digest"`
	Status       store.BundleStatus  `json:"status"`
	By           string              `json:"by"`
	Proposer     string              `json:"proposer,omitempty"`
	At           time.Time           `json:"at"`
	BreakGlass   bool                `json:"break_glass,omitempty"`
	Reason       string              `json:"reason,omitempty"`
	Rollback     bool                `json:"rollback,omitempty"`
	LimitChanges []store.LimitChange `json:"limit_changes,omitempty"`
	Failures     []gateCaseView      `json:"failures"`
	TestFailures []string            `json:"test_failures,omitempty"`
	Impact       json.RawMessage     `json:"impact,omitempty"`
	// Review is what a second operator is shown (the diff, the data diff
	// and the new allowances), for a record kept with one.
	review.Review
}

// gateCaseView is one failing gate case of a stored bundle record.
type gateCaseView struct {
	Case     string      `json:"case"`
	Amount   money.Cents `json:"amount"`
	Expected string      `json:"expected"`
	Got      string      `json:"got"`
}

// boundsView is a workflow's bounds. A workflow stored before bounds has
// none to show: it runs under the active bundle's.
type boundsView struct {
	MaxSteps    int         `json:"max_steps"`
	MaxSpend    money.Cents `json:"max_spend"`
	Deadline    time.Time   `json:"deadline"`
	MaxAttempts int         `json:"max_attempts"`
}

func newWorkflowView(w store.Workflow) workflowView {
	v := workflowView{ID: w.ID, Ticket: w.Ticket, User: w.User, Status: w.Status,
		PolicyRevision: w.PolicyRevision, Created: w.Created, Updated: w.Updated, AgentVersion: w.AgentVersion}
	if w.Bounds != (store.Bounds{}) {
		b := boundsView(w.Bounds)
		v.Bounds = &b
	}
	return v
}

// snapshotView is a workflow with its steps, from one engine read.
func snapshotView(snap engine.Snapshot) workflowView {
	v := newWorkflowView(snap.Workflow)
	v.Steps = make([]stepView, 0, len(snap.Steps))
	for _, st := range snap.Steps {
		var a *store.Approval
		if found, ok := snap.Approvals[st.Approval]; ok && st.Approval != "" {
			a = &found
		}
		v.Steps = append(v.Steps, newStepView(st, a))
	}
	return v
}

// newStepView shows st with a, the approval it names (nil: none or gone).
func newStepView(st store.Step, a *store.Approval) stepView {
	v := stepView{Workflow: st.Workflow, N: st.N, Tool: st.Tool, Args: newArgsView(st.Tool, st.Args),
		Status: st.Status, Decision: st.Decision, Rule: st.Rule,
		Result: st.Result, Note: st.Note, DuplicateOf: st.DuplicateOf, AgentReason: st.AgentReason}
	if a != nil {
		v.Approval = &stepApprovalView{ID: a.ID, Status: a.Status, Summary: a.Summary, Expires: a.Expires}
		if a.Status == store.ApprovalRejected {
			v.ApprovalComment = a.Comment
		}
	}
	switch r := st.Reason; {
	case r == nil:
	case st.Status == store.StepDenied, st.Status == store.StepWaitingApproval, st.Status == store.StepHeld:
		v.Reason = &reasonView{Text: r.Text, Facts: r.Facts, Next: r.Next}
	}
	if (st.Status == store.StepStarted || st.Status == store.StepUnknown) && !st.ResolveAfter.IsZero() {
		at := st.ResolveAfter.UTC()
		v.ResolveAfter = &at
	}
	return v
}

func newArgsView(name tool.Name, a tool.Args) argsView {
	v := argsView{Order: a.Order}
	if name == tool.IssueRefund {
		v.Amount, v.Line, v.Quantity = &a.Amount, a.Line, a.Quantity
	}
	return v
}

func newApprovalView(a store.Approval) approvalView {
	return approvalView{ID: a.ID, Workflow: a.Workflow, N: a.N, Tool: a.Tool, Args: newArgsView(a.Tool, a.Args),
		Summary: a.Summary, Requester: a.Requester, Approver: a.Approver, Status: a.Status,
		Comment: a.Comment, Retroactive: a.Retroactive, Created: a.Created, Expires: a.Expires, CallHash: a.CallHash,
		Rule: a.Rule, Ticket: a.Ticket, Customer: a.Customer, OrderPaid: a.OrderPaid, AgentReason: a.AgentReason}
}

// newApprovalItemView is an approval as the person reviewing it sees it.
func newApprovalItemView(it engine.ApprovalItem) approvalView {
	v := newApprovalView(it.Approval)
	v.OrderRefunded, v.CanApprove, v.Code = &it.Refunded, &it.CanApprove, it.Code
	if p := it.Previous; p != nil {
		v.Replaces = &replacedView{ID: p.ID, Args: newArgsView(p.Tool, p.Args), Status: p.Status, CallHash: p.CallHash}
	}
	return v
}

func newDecisionsAnswer(p store.DecisionPage) decisionsAnswer {
	out := decisionsAnswer{Decisions: make([]engine.LogEntry, 0, len(p.Decisions))}
	for _, d := range p.Decisions {
		out.Decisions = append(out.Decisions, engine.NewLogEntry(d))
	}
	if p.Next != 0 {
		out.NextCursor = newCursor(p.Next)
	}
	return out
}

// A cursor is the sequence number of the last item a page showed (a
// decision's, or a workflow's creation number), opaque to clients:
// next_cursor is passed back as it came.
func newCursor(seq uint64) string {
	return base64.RawURLEncoding.EncodeToString(binary.BigEndian.AppendUint64(nil, seq))
}

// parseCursor reads a cursor newCursor wrote, and nothing else: a string
// base64 would also decode to the same number (a newline inside, other
// trailing bits) is not one.
func parseCursor(s string) (uint64, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return 0, err
	}
	if len(b) != 8 || binary.BigEndian.Uint64(b) == 0 || newCursor(binary.BigEndian.Uint64(b)) != s {
		return 0, errors.New("not a cursor")
	}
	return binary.BigEndian.Uint64(b), nil
}

func newBundleView(r store.BundleRecord) bundleView {
	v := bundleView{Seq: r.Seq, Revision: r.Revision, Digest: r.Digest, Status: r.Status, By: r.By, Proposer: r.Proposer, At: r.At,
		BreakGlass: r.BreakGlass, Reason: r.Reason, Rollback: r.Rollback, LimitChanges: r.LimitChanges, TestFailures: r.TestFailures,
		Impact: r.Impact, Review: storedReview(r)}
	if r.Failures != nil {
		v.Failures = make([]gateCaseView, 0, len(r.Failures))
	}
	for _, f := range r.Failures {
		v.Failures = append(v.Failures, gateCaseView{Case: f.Case, Amount: f.Amount, Expected: f.Expected, Got: f.Got})
	}
	return v
}

// storedReview is a record's review, or none for a record kept without
// one (or with one this version cannot read).
func storedReview(r store.BundleRecord) review.Review {
	var rv review.Review
	if len(r.Review) == 0 || json.Unmarshal(r.Review, &rv) != nil {
		return review.Review{}
	}
	return rv
}

// newBundleViews is the history without the reviews: each may hold a
// megabyte of diffs, and GET /v1/bundles/{digest} answers one.
func newBundleViews(h []store.BundleRecord) []bundleView {
	out := make([]bundleView, 0, len(h))
	for _, r := range h {
		r.Review = nil
		out = append(out, newBundleView(r))
	}
	return out
}

// The small answers.
type (
	// awaitingAnswer is a bundle that waits for a second operator, with
	// what its awaiting record holds for them: the replay of recent
	// decisions and the review.
	awaitingAnswer struct {
		Status       store.BundleStatus   `json:"status"`
		Revision     string               `json:"revision"`
		Digest       string               `json:"digest"`
		LimitChanges []policy.LimitChange `json:"limit_changes"`
		Message      string               `json:"message"`
		Impact       json.RawMessage      `json:"impact,omitempty"`
		review.Review
	}
	// previewAnswer is a dry run of an upload: the gate, the replay and
	// the review a second operator would see.
	previewAnswer struct {
		Gate   policy.Report `json:"gate"`
		Impact impact.Report `json:"impact"`
		review.Review
	}
	healthAnswer struct {
		Status string `json:"status"`
	}
	readyAnswer struct {
		Status         string `json:"status"`
		PolicyRevision string `json:"policy_revision"`
	}
	toolsAnswer struct {
		Tools []tool.Spec `json:"tools"`
	}
	switchesAnswer struct {
		Switches map[tool.Name]bool `json:"switches"`
	}
	modesAnswer struct {
		Modes []modeView `json:"modes"`
	}
	switchAnswer struct {
		Tool    tool.Name `json:"tool"`
		Enabled bool      `json:"enabled"`
	}
	epochAnswer struct {
		Epoch int `json:"epoch"`
	}
)

// modeView is one tool's stage of autonomy: the mode in force for agent
// versions whose breaker has not tripped, where it comes from, and the
// breakers that hold failures (a tripped one runs the tool in
// approval_only for its agent version until an operator sets the mode).
type modeView struct {
	Tool    tool.Name   `json:"tool"`
	Mode    policy.Mode `json:"mode"`
	Default policy.Mode `json:"default"`
	// SetBy, Reason and SetAt are the operator's last setting; absent while
	// the bundle's default applies.
	SetBy    string        `json:"set_by,omitempty"`
	Reason   string        `json:"reason,omitempty"`
	SetAt    *time.Time    `json:"set_at,omitempty"`
	Breakers []breakerView `json:"breakers"`
}

// breakerView is one agent version's breaker for a tool.
type breakerView struct {
	AgentVersion string `json:"agent_version"`
	// Failures is how many failures the window held at the last one.
	Failures int              `json:"failures"`
	Tripped  bool             `json:"tripped"`
	Trip     *breakerTripView `json:"trip,omitempty"`
}

// breakerTripView is what tripped a breaker and when.
type breakerTripView struct {
	At            time.Time `json:"at"`
	Failures      int       `json:"failures"`
	WindowSeconds int64     `json:"window_seconds"`
	Last          string    `json:"last"`
}

func newModeView(m engine.ToolMode) modeView {
	v := modeView{Tool: m.Tool, Mode: m.Mode, Default: m.Default, Breakers: make([]breakerView, 0, len(m.Breakers))}
	if m.Set != nil {
		at := m.Set.At
		v.SetBy, v.Reason, v.SetAt = m.Set.By, m.Set.Reason, &at
	}
	for _, b := range m.Breakers {
		bv := breakerView{AgentVersion: b.AgentVersion, Failures: len(b.Failures), Tripped: b.Tripped()}
		if b.Trip != nil {
			bv.Trip = &breakerTripView{At: b.Trip.At, Failures: b.Trip.Failures, WindowSeconds: b.Trip.WindowSeconds, Last: b.Trip.Last}
		}
		v.Breakers = append(v.Breakers, bv)
	}
	return v
}
