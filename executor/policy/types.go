package policy

import (
	"time"

	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/tool"
)

// Decision is the outcome of the call policy.
type Decision string

// The three decisions. Anything else from a bundle is an unexpected result.
const (
	Allow           Decision = "ALLOW"
	Deny            Decision = "DENY"
	RequireApproval Decision = "REQUIRE_APPROVAL"
)

func (d Decision) valid() bool {
	return d == Allow || d == Deny || d == RequireApproval
}

// Result is one decision, the rule that made it and the bundle revision
// that answered, which the decision log records together.
type Result struct {
	Decision Decision `json:"decision"`
	Rule     string   `json:"rule"`
	Revision string   `json:"revision"`
}

// Input is what the call policy decides on: the rep's delegation, the
// normalized call and the facts the engine read from the systems of record
// and its own records. A nil User or Order is sent as null, which policy
// denies (R0, R2).
type Input struct {
	User   *User
	Tool   tool.Name
	Args   tool.Args
	Order  *Order
	Totals Totals
	// Workflow is where the call stands against its workflow's bounds.
	// Nil (a recorded input from before bounds, the gate's cases) sends
	// no workflow member, and the bound rules do not apply.
	Workflow *Run
	// Now is the moment of the decision by the engine's clock, sent as
	// now: {"rfc3339", "ns"}: the only time a policy has (time.now_ns is
	// a forbidden built-in), so a replay decides at the time recorded and
	// the gate's cases at a fixed one. The zero time (an input recorded
	// before inputs carried it) sends no now member; a rule that needs it
	// then finds it undefined, and its negation denies.
	Now time.Time
}

// Run is the call's workflow as its bounds see it. The engine computes
// PastDeadline from its clock: the policy has none.
type Run struct {
	Step         int         // this step's number in the workflow
	MaxSteps     int         // the workflow's bound on steps (B1)
	Spent        money.Cents // refunds of the workflow's steps done, started or unknown
	MaxSpend     money.Cents // the workflow's bound on refunds (B2)
	PastDeadline bool        // the workflow's deadline has passed (B3)
	Attempt      int         // this step's attempt number, from 1
	MaxAttempts  int         // the bound on attempts per step (B4)
}

// User is the delegation of the rep the agent works for, from their token.
type User struct {
	ID            string
	Role          string
	Region        string
	Scopes        []string
	RefundCeiling money.Cents
}

// Order is the order record as the order system returned it.
type Order struct {
	ID       string
	Region   string
	Customer string
	Paid     money.Cents
	Status   string
	// Lines are what was bought; R12 finds a line-item refund's line
	// here and what is left to refund on it.
	Lines []Line
	// PlacedAt and ShippedAt are when the order was placed and shipped,
	// sent as RFC 3339 placed_at and shipped_at; a zero time (an order not
	// shipped, an order system that does not say) sends no member.
	PlacedAt  time.Time
	ShippedAt time.Time
}

// Line is one line of an order. RefundedQuantity is what the ledger has
// booked as refunded on it already.
type Line struct {
	ID               string
	SKU              string
	Description      string
	UnitAmount       money.Cents
	Quantity         int64
	RefundedQuantity int64
}

// Line returns the order's line with id, if it has one.
func (o *Order) Line(id string) (Line, bool) {
	if o == nil {
		return Line{}, false
	}
	for _, l := range o.Lines {
		if l.ID == id {
			return l, true
		}
	}
	return Line{}, false
}

// Totals are the amounts already spent that the caps and the cumulative
// threshold count. Steps done, started or unknown all count as spent.
type Totals struct {
	OrderRefunded money.Cents // refunds already on this order
	RepDay        money.Cents // the rep's refunds in the rolling window
	AgentHour     money.Cents // the agent's refunds in the last hour
	// OrderReships counts the order's reships in any workflow that are
	// done, started or unknown (R10 asks a lead for the second, R11 denies
	// a third).
	OrderReships int
}

// Limits are the numbers of a bundle, from data.countersign.limits. The
// policy reads them itself; they are decoded here for the parts of the
// system outside Rego (the rolling window, approval and token lifetimes).
type Limits struct {
	RefundAuto          money.Cents
	RefundMax           money.Cents
	ReshipApprovalValue money.Cents
	RepDaily            money.Cents
	RepWindow           time.Duration
	AgentHourly         money.Cents
	ApprovalTTL         time.Duration
	TokenTTL            time.Duration
}

// Autonomy is what a bundle's data says about the stages of autonomy,
// beside its limits.
type Autonomy struct {
	// Modes are the default mode of each tool, from
	// data.countersign.modes; a tool absent from it (or a bundle without
	// it) is ModeAuto. An operator's PUT /v1/modes/{tool} overrides it.
	Modes map[tool.Name]Mode
	// Breaker is data.countersign.breaker, or DefaultBreaker when the
	// bundle has none.
	Breaker BreakerLimits
	// Bounds are every workflow's bounds unless its creation narrows
	// them, from data.countersign.bounds (DefaultBounds says what an
	// absent member is).
	Bounds Bounds
}

// Bounds are the limits of one run of an agent: how many steps a workflow
// may have, how much it may refund in all, how long it may run and how
// many times one step may be attempted.
type Bounds struct {
	MaxSteps    int
	MaxSpend    money.Cents
	Deadline    time.Duration // from the workflow's creation
	MaxAttempts int
}

// Mode is the default mode of t.
func (a Autonomy) Mode(t tool.Name) Mode {
	if m, ok := a.Modes[t]; ok {
		return m
	}
	return ModeAuto
}

// ApproverInput is one attempt by a person to approve a held call.
type ApproverInput struct {
	Approver  Approver
	Requester Requester
	Tool      tool.Name
	Amount    money.Cents
	Expires   time.Time
	Now       time.Time
}

// Approver is the person approving, from their own bearer token.
type Approver struct {
	ID           string
	Role         string
	Region       string
	ApproveLimit money.Cents
}

// Requester is the rep whose call is held.
type Requester struct {
	ID     string
	Region string
}

// Refusal is why the approver policy refused an approval. The codes are
// the error codes of the API. The empty Refusal means the approval is allowed.
type Refusal string

// The refusals, in the order the approver policy checks them.
const (
	RequesterCannotApprove Refusal = "requester_cannot_approve"
	ApproverNotLead        Refusal = "approver_not_lead"
	ApprovalExpired        Refusal = "approval_expired"
	ApproverOutsideRegion  Refusal = "approver_outside_region"
	AboveApproverLimit     Refusal = "above_approver_limit"
)

func (r Refusal) valid() bool {
	switch r {
	case RequesterCannotApprove, ApproverNotLead, ApprovalExpired, ApproverOutsideRegion, AboveApproverLimit:
		return true
	}
	return false
}

// Mode is how far a tool is trusted to act on its own: the stages of
// earned autonomy. The engine applies it after the call policy decides, so
// a bundle release never has to change for a tool to move between stages.
type Mode string

// The modes, from the least autonomy to the most.
const (
	// ModeShadow decides every call exactly as in production and records
	// the decision, but dispatches nothing and requests no approval.
	ModeShadow Mode = "shadow"
	// ModeApprovalOnly turns every ALLOW into REQUIRE_APPROVAL (rule
	// mode-approval-only); a DENY stays a DENY.
	ModeApprovalOnly Mode = "approval_only"
	// ModeAuto acts on the policy's decision as it is.
	ModeAuto Mode = "auto"
)

// Valid reports whether m is one of the three modes.
func (m Mode) Valid() bool { return m == ModeShadow || m == ModeApprovalOnly || m == ModeAuto }

// BreakerLimits are the thresholds of the circuit breaker on semantic
// failures, from data.countersign.breaker: MaxFailures failures of one
// tool by one agent version within Window trip that tool to approval_only
// for that version.
type BreakerLimits struct {
	Window      time.Duration
	MaxFailures int
}
