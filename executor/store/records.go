package store

import (
	"encoding/json"
	"time"

	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/tool"
)

// WorkflowStatus is where a workflow stands as a whole.
type WorkflowStatus string

// Workflow statuses, shown by the API as they are (sidecar/openapi.json
// lists them).
const (
	WorkflowRunning             WorkflowStatus = "running"
	WorkflowWaitingApproval     WorkflowStatus = "waiting_approval"
	WorkflowPaused              WorkflowStatus = "paused"
	WorkflowNeedsReconciliation WorkflowStatus = "needs_reconciliation"
	WorkflowDone                WorkflowStatus = "done"
	WorkflowFailed              WorkflowStatus = "failed"
)

// StepStatus is where one step stands.
type StepStatus string

// Step statuses, shown by the API as they are (sidecar/openapi.json lists
// them).
const (
	StepPending         StepStatus = "pending"
	StepHeld            StepStatus = "held"
	StepWaitingApproval StepStatus = "waiting_approval"
	StepStarted         StepStatus = "started"
	StepUnknown         StepStatus = "unknown"
	StepDone            StepStatus = "done"
	StepDenied          StepStatus = "denied"
	StepSuppressed      StepStatus = "suppressed"
	StepCompensated     StepStatus = "compensated"
	// StepShadowed: the tool is in shadow mode; the step was decided as
	// in production and ended there, nothing dispatched, no approval
	// requested, nothing spent.
	StepShadowed StepStatus = "shadowed"
)

// Spent reports whether a refund step in this status counts against the
// order, the rep's day and the agent's hour: its effect happened or may have.
func (s StepStatus) Spent() bool {
	return s == StepStarted || s == StepUnknown || s == StepDone
}

// ApprovalStatus is where an approval request stands.
type ApprovalStatus string

// Approval statuses, shown by the API as they are (sidecar/openapi.json
// lists them).
const (
	ApprovalPending  ApprovalStatus = "pending"
	ApprovalApproved ApprovalStatus = "approved"
	ApprovalUsed     ApprovalStatus = "used"
	ApprovalRejected ApprovalStatus = "rejected"
	ApprovalExpired  ApprovalStatus = "expired"
	ApprovalVoid     ApprovalStatus = "void"
)

// Delegation is what a rep delegated to the agent, as their token claimed
// it when the workflow was created.
type Delegation struct {
	ID            string      `json:"id"`
	Role          string      `json:"role"`
	Region        string      `json:"region"`
	Scopes        []string    `json:"scopes"`
	RefundCeiling money.Cents `json:"refund_ceiling"`
	// Expires is the exp of the token that created the workflow, or of a
	// later token of the same rep that refreshed it; zero: never (a
	// workflow opened in process, without a token).
	Expires time.Time `json:"expires,omitzero"`
}

// Workflow is one ticket worked by the agent for one rep.
type Workflow struct {
	ID             string         `json:"id"`
	Ticket         string         `json:"ticket"`
	User           string         `json:"user"`
	Delegation     Delegation     `json:"delegation"`
	Status         WorkflowStatus `json:"status"`
	PolicyRevision string         `json:"policy_revision"`
	Created        time.Time      `json:"created"`
	Updated        time.Time      `json:"updated"`
	Steps          int            `json:"steps"` // how many steps exist; the next is Steps+1
	// AgentVersion is what the agent declared itself to be when it opened
	// the workflow: the circuit breaker keeps a window per tool and
	// version.
	AgentVersion string `json:"agent_version,omitempty"`
	// Bounds are the workflow's bounds, fixed when it opened: the
	// bundle's, narrowed by what the agent asked for. A workflow stored
	// before bounds has the zero value, which the engine reads as the
	// active bundle's bounds.
	Bounds Bounds `json:"bounds,omitzero"`
}

// Bounds bound one workflow: its number of steps, its refunds in all, the
// moment after which it pays nothing more, and the attempts of each step.
type Bounds struct {
	MaxSteps    int         `json:"max_steps"`
	MaxSpend    money.Cents `json:"max_spend"`
	Deadline    time.Time   `json:"deadline"`
	MaxAttempts int         `json:"max_attempts"`
}

// Step is one proposed tool call and everything that happened to it.
type Step struct {
	Workflow string     `json:"workflow"`
	N        int        `json:"n"`
	Tool     tool.Name  `json:"tool"`
	Args     tool.Args  `json:"args"`
	Status   StepStatus `json:"status"`
	Decision string     `json:"decision,omitempty"`
	Rule     string     `json:"rule,omitempty"`
	// Call is tool.CallHash of the call: the run-level dedupe key.
	Call string `json:"call"`
	// Key is the stable idempotency key sent to the ledger.
	Key      string `json:"key,omitempty"`
	Approval string `json:"approval,omitempty"`
	// ClaimedApprover is an approved_by that the model wrote into the
	// arguments. Only the engine with its StrictSchema control removed keeps
	// one; the designed system refuses such arguments.
	ClaimedApprover string `json:"claimed_approver,omitempty"`
	// Baseline is the observation taken before the effect: for a
	// reshipment, how many shipments the order had.
	Baseline *int            `json:"baseline,omitempty"`
	Result   json.RawMessage `json:"result,omitempty"`
	Attempts int             `json:"attempts"`
	Note     string          `json:"note,omitempty"`
	// Refusal is the code a system of record refused the call with
	// ("amount_above_max", ...), for steps denied downstream.
	Refusal     string    `json:"refusal,omitempty"`
	DuplicateOf int       `json:"duplicate_of,omitempty"`
	Created     time.Time `json:"created"`
	ReservedAt  time.Time `json:"reserved_at,omitzero"`
	Finished    time.Time `json:"finished,omitzero"`
	// TokenDeadline bounds the exp of every actor token minted for the
	// step's effect: it is recorded before a token is minted (in the
	// write-ahead transaction, or extended durably before a later
	// attempt), and no token may outlive it. Zero: none recorded (the
	// step was never dispatched, or was stored before deadlines were).
	TokenDeadline time.Time `json:"token_deadline,omitzero"`
	// ResolveAfter is TokenDeadline plus the clock skew the receivers are
	// allowed: after it no request of the step can land, so a lookup that
	// finds no effect proves there is none.
	ResolveAfter time.Time `json:"resolve_after,omitzero"`
	// ReleaseOnProof marks a started step whose last attempt was answered
	// without an effect of its own (a 5xx, no connection, or a refusal
	// while an earlier request could still land): once its effect is
	// proven absent, its reservation is released and the call decided
	// again, as that answer alone would have released it before effects
	// were fenced.
	ReleaseOnProof bool `json:"release_on_proof,omitempty"`
	// Reason says why a step is denied, waits for an approval or is held,
	// and what can be done next, in words and facts built from the
	// decision's input and the bundle's limits. Nil in any other status,
	// and on a step stored before reasons were.
	Reason *Reason `json:"reason,omitempty"`
	// AgentReason is why the agent says it made the call, as it wrote
	// it: shown to the people who read the step and its approval, never
	// given to the policy.
	AgentReason string `json:"agent_reason,omitempty"`
}

// Reason is what the agent is told of a step that did not run: the fact
// that decided (Text, and Facts with its numbers: cents as integers, ids)
// and what can be done next (Next).
type Reason struct {
	Text  string         `json:"text"`
	Facts map[string]any `json:"facts,omitempty"`
	Next  string         `json:"next"`
}

// Approval is a request for a lead's approval of exactly one call.
type Approval struct {
	ID              string    `json:"id"`
	Workflow        string    `json:"workflow"`
	N               int       `json:"n"`
	Tool            tool.Name `json:"tool"`
	Args            tool.Args `json:"args"`
	CallHash        string    `json:"call_hash"`
	Summary         string    `json:"summary"`
	Requester       string    `json:"requester"`
	RequesterRegion string    `json:"requester_region"`
	// Rule is the policy rule that asked for the approval; Ticket is the
	// workflow's; Customer and OrderPaid are the order record's when the
	// approval was requested. An approval stored before they were kept
	// has them empty.
	Rule      string      `json:"rule,omitempty"`
	Ticket    string      `json:"ticket,omitempty"`
	Customer  string      `json:"customer,omitempty"`
	OrderPaid money.Cents `json:"order_paid,omitempty"`
	// Replaces is the earlier approval of the same step that this one
	// replaces: after an amendment, an expiry or a rejection of another
	// call.
	Replaces string         `json:"replaces,omitempty"`
	Approver string         `json:"approver,omitempty"`
	Status   ApprovalStatus `json:"status"`
	Comment  string         `json:"comment,omitempty"`
	// Retroactive marks an approval recorded after the effect (ratification
	// during an incident), so it is never mistaken for a prior approval.
	Retroactive bool      `json:"retroactive,omitempty"`
	Created     time.Time `json:"created"`
	Expires     time.Time `json:"expires"`
	Decided     time.Time `json:"decided,omitzero"`
	// AgentReason is the step's when the approval was requested: why the
	// agent says it made the call.
	AgentReason string `json:"agent_reason,omitempty"`
}

// Decision is one entry of the decision log: what the call policy was
// asked and what it answered, in the terms of OPA's decision log. Decision
// and Rule are the policy's result object, which has exactly those two
// members (the policy package refuses any other shape). A record written
// before the log took OPA's shape has no ID, Path, Input or Digest.
type Decision struct {
	Seq uint64 `json:"seq"`
	// ID is unique to the decision (OPA's decision_id).
	ID string    `json:"id,omitempty"`
	At time.Time `json:"at"`
	// Path is the policy path evaluated, as OPA names it
	// ("countersign/call/decision").
	Path string `json:"path,omitempty"`
	// Input is the input document the policy evaluated, as JSON; a replay
	// evaluates it again against another bundle.
	Input    json.RawMessage `json:"input,omitempty"`
	Workflow string          `json:"workflow"`
	N        int             `json:"n"`
	User     string          `json:"user"`
	Tool     tool.Name       `json:"tool"`
	Args     tool.Args       `json:"args"`
	Decision string          `json:"decision"`
	Rule     string          `json:"rule"`
	Revision string          `json:"revision"`
	// Digest is the sha256 of the bundle that answered.
	Digest string `json:"digest,omitempty"`
	// AgentVersion is the workflow's agent version.
	AgentVersion string `json:"agent_version,omitempty"`
	// Mode is the tool's mode when it was decided ("" before modes
	// existed: auto). Decision and Rule stay the policy's answer; under
	// approval_only an ALLOW was acted on as REQUIRE_APPROVAL.
	Mode string `json:"mode,omitempty"`
	// Shadow marks a decision made in shadow mode: nothing was dispatched.
	Shadow bool `json:"shadow,omitempty"`
	// Audit is the id of the audit record that covers the decision, made
	// in its transaction; on a fleet the record is chained later, and
	// AuditPending is instead the number it waited under, which the
	// chained record keeps as its pending.
	Audit        string `json:"audit,omitempty"`
	AuditPending uint64 `json:"audit_pending,omitempty"`
}

// BundleStatus is the standing of one bundle activation attempt.
type BundleStatus string

// Bundle statuses, shown by the API as they are (sidecar/openapi.json
// lists them).
const (
	BundleActive     BundleStatus = "active"
	BundleSuperseded BundleStatus = "superseded"
	BundleRejected   BundleStatus = "rejected"
	// BundleAwaiting: it loosens a limit (or breaks the glass) and waits
	// for a second operator; BundleApproved: one approved it, and its
	// activation is a record of its own.
	BundleAwaiting BundleStatus = "awaiting_second_operator"
	BundleApproved BundleStatus = "approved"
)

// BundleFailure is one failing gate case.
type BundleFailure struct {
	Case         string      `json:"case"`
	Amount       money.Cents `json:"amount"`
	Expected     string      `json:"expected"`
	Got          string      `json:"got"`
	ExpectedRule string      `json:"expected_rule,omitempty"`
	GotRule      string      `json:"got_rule,omitempty"`
}

// BundleRecord is one bundle activation attempt.
type BundleRecord struct {
	Seq          uint64          `json:"seq"`
	Revision     string          `json:"revision"`
	Digest       string          `json:"digest"`
	Status       BundleStatus    `json:"status"`
	By           string          `json:"by"`
	Proposer     string          `json:"proposer,omitempty"` // when By approved what Proposer proposed
	At           time.Time       `json:"at"`
	BreakGlass   bool            `json:"break_glass,omitempty"`
	Reason       string          `json:"reason,omitempty"`
	Rollback     bool            `json:"rollback,omitempty"`
	LimitChanges []LimitChange   `json:"limit_changes,omitempty"`
	Failures     []BundleFailure `json:"failures"`
	TestFailures []string        `json:"test_failures,omitempty"`
	// Impact is the replay of recent decisions against the bundle, as
	// JSON, when one was made.
	Impact json.RawMessage `json:"impact,omitempty"`
	// Review is what a second operator is shown of the bundle (its
	// differences from the bundle it would replace and what it newly
	// allows), as JSON, when one was made.
	Review json.RawMessage `json:"review,omitempty"`
}

// LimitChange is one limit a bundle changes, in the limit's units.
type LimitChange struct {
	Name string `json:"name"`
	From int64  `json:"from"`
	To   int64  `json:"to"`
}
