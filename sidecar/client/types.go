package client

import (
	"encoding/json"
	"time"

	"github.com/countersign/countersign/executor/money"
)

// The answers of the API, field for field (sidecar/openapi.json): the
// sidecar answers with these types. Fields the API shows only sometimes
// are pointers or omitempty, as it writes them.

// WorkflowStatus is where a workflow stands as a whole.
type WorkflowStatus string

// The workflow statuses.
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

// The step statuses.
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
	StepShadowed        StepStatus = "shadowed"
)

// ApprovalStatus is where an approval request stands.
type ApprovalStatus string

// The approval statuses.
const (
	ApprovalPending  ApprovalStatus = "pending"
	ApprovalApproved ApprovalStatus = "approved"
	ApprovalUsed     ApprovalStatus = "used"
	ApprovalRejected ApprovalStatus = "rejected"
	ApprovalExpired  ApprovalStatus = "expired"
	ApprovalVoid     ApprovalStatus = "void"
)

// Tool is one tool of the catalog (GET /v1/tools).
type Tool struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// InputSchema is the tool's JSON Schema, as the API gives it.
	InputSchema json.RawMessage `json:"input_schema"`
	// Annotations are hints about the tool for an agent's host; nil from
	// a sidecar older than them.
	Annotations *ToolAnnotations `json:"annotations,omitempty"`
}

// ToolAnnotations are what an agent's host may know of a tool before
// calling it (MCP's tool annotations): hints, never a control.
type ToolAnnotations struct {
	Title       string `json:"title"`
	ReadOnly    bool   `json:"read_only"`
	Destructive bool   `json:"destructive"`
	Idempotent  bool   `json:"idempotent"`
	OpenWorld   bool   `json:"open_world"`
}

// ToolList is GET /v1/tools.
type ToolList struct {
	Tools []Tool `json:"tools"`
}

// NewWorkflow is the body of POST /v1/workflows. Ticket is required; ID is
// chosen by the sidecar when empty.
type NewWorkflow struct {
	Ticket       string     `json:"ticket"`
	ID           string     `json:"id,omitempty"`
	AgentVersion string     `json:"agent_version,omitempty"`
	Bounds       *NewBounds `json:"bounds,omitempty"`
}

// NewStep is the body of POST /v1/workflows/{id}/steps. Tool and Args are
// required; Args is marshalled as it is (a json.RawMessage goes byte for
// byte). A Ticket opens the workflow when its id is not in use yet, with
// AgentVersion and Bounds as NewWorkflow has them; without one the
// workflow must exist, and AgentVersion and Bounds stay empty.
type NewStep struct {
	Tool         string     `json:"tool"`
	Args         any        `json:"args"`
	Reason       string     `json:"reason,omitempty"`
	Ticket       string     `json:"ticket,omitempty"`
	AgentVersion string     `json:"agent_version,omitempty"`
	Bounds       *NewBounds `json:"bounds,omitempty"`
}

// NewBounds narrows the bundle's bounds for one workflow; nil fields keep
// the bundle's.
type NewBounds struct {
	MaxSteps *int         `json:"max_steps,omitempty"`
	MaxSpend *money.Cents `json:"max_spend,omitempty"`
	Deadline *time.Time   `json:"deadline,omitempty"`
}

// Workflow is a workflow; Steps is nil when it was just created and a list
// ([] for none) when it was read.
type Workflow struct {
	ID             string         `json:"id"`
	Ticket         string         `json:"ticket"`
	User           string         `json:"user"`
	Status         WorkflowStatus `json:"status"`
	PolicyRevision string         `json:"policy_revision"`
	Created        time.Time      `json:"created"`
	Updated        time.Time      `json:"updated"`
	AgentVersion   string         `json:"agent_version,omitempty"`
	Bounds         *Bounds        `json:"bounds,omitempty"`
	Steps          []Step         `json:"steps,omitzero"`
}

// Bounds are a workflow's bounds, fixed when it opened.
type Bounds struct {
	MaxSteps    int         `json:"max_steps"`
	MaxSpend    money.Cents `json:"max_spend"`
	Deadline    time.Time   `json:"deadline"`
	MaxAttempts int         `json:"max_attempts"`
}

// WorkflowQuery filters and pages GET /v1/workflows. Zero values leave a
// parameter out (every status, the server's default page size, the first
// page).
type WorkflowQuery struct {
	Status WorkflowStatus
	Limit  int
	Cursor string
}

// WorkflowPage is one page of GET /v1/workflows, oldest first. NextCursor
// is "" on the last page.
type WorkflowPage struct {
	Workflows  []WorkflowItem `json:"workflows"`
	NextCursor string         `json:"next_cursor"`
}

// WorkflowItem is a workflow as a list shows it: how many steps it has
// instead of the steps (Workflow reads them).
type WorkflowItem struct {
	ID             string         `json:"id"`
	Ticket         string         `json:"ticket"`
	User           string         `json:"user"`
	Status         WorkflowStatus `json:"status"`
	PolicyRevision string         `json:"policy_revision"`
	Created        time.Time      `json:"created"`
	Updated        time.Time      `json:"updated"`
	AgentVersion   string         `json:"agent_version,omitempty"`
	Bounds         *Bounds        `json:"bounds,omitempty"`
	StepCount      int            `json:"step_count"`
}

// Step is one step of a workflow.
type Step struct {
	Workflow    string          `json:"workflow"`
	N           int             `json:"n"`
	Tool        string          `json:"tool"`
	Args        Args            `json:"args"`
	Status      StepStatus      `json:"status"`
	Decision    string          `json:"decision"`
	Rule        string          `json:"rule"`
	Approval    *StepApproval   `json:"approval,omitempty"`
	Result      json.RawMessage `json:"result,omitempty"`
	Note        string          `json:"note,omitempty"`
	DuplicateOf int             `json:"duplicate_of,omitempty"`
	// ResolveAfter is set on a started or unknown step: a request for its
	// effect may land until then, and a resume after it resolves the step.
	ResolveAfter *time.Time `json:"resolve_after,omitempty"`
	// Error is set on a denied step (the API's 403 body): why it was denied.
	Error *Error `json:"error,omitempty"`
	// Reason is set on a step denied, waiting for an approval or held:
	// the fact that decided and what the agent can do next.
	Reason *Reason `json:"reason,omitempty"`
	// ApprovalComment is the comment of the lead who rejected the step's
	// approval.
	ApprovalComment string `json:"approval_comment,omitempty"`
	// AgentReason is the reason the agent gave when it proposed the call.
	AgentReason string `json:"agent_reason,omitempty"`
}

// Reason is why a step did not run and what can be done next. Facts holds
// the numbers and ids Text states (amounts in integer cents; a JSON number
// decodes as float64 here).
type Reason struct {
	Text  string         `json:"text"`
	Facts map[string]any `json:"facts,omitempty"`
	Next  string         `json:"next"`
}

// StepApproval is the approval a step waits on or ran under.
type StepApproval struct {
	ID      string         `json:"id"`
	Status  ApprovalStatus `json:"status"`
	Summary string         `json:"summary"`
	Expires time.Time      `json:"expires"`
}

// Args are a tool call's normalized arguments as the API shows them:
// amount, line and quantity for refunds only.
type Args struct {
	Order    string       `json:"order"`
	Amount   *money.Cents `json:"amount,omitempty"`
	Line     string       `json:"line,omitempty"`
	Quantity int64        `json:"quantity,omitempty"`
}

// Approval is one approval request.
type Approval struct {
	ID          string         `json:"id"`
	Workflow    string         `json:"workflow"`
	N           int            `json:"n"`
	Tool        string         `json:"tool"`
	Args        Args           `json:"args"`
	Summary     string         `json:"summary"`
	Requester   string         `json:"requester"`
	Approver    string         `json:"approver,omitempty"`
	Status      ApprovalStatus `json:"status"`
	Comment     string         `json:"comment,omitempty"`
	Retroactive bool           `json:"retroactive,omitempty"`
	Created     time.Time      `json:"created"`
	Expires     time.Time      `json:"expires"`
	CallHash    string         `json:"call_hash"`

	Rule      string      `json:"rule,omitempty"`
	Ticket    string      `json:"ticket,omitempty"`
	Customer  string      `json:"customer,omitempty"`
	OrderPaid money.Cents `json:"order_paid,omitempty"`
	// AgentReason is the reason the agent gave for the call, in its own
	// words; the policy never saw it.
	AgentReason string `json:"agent_reason,omitempty"`
	// The rest are a reviewer's, shown on the queue and on GET of one
	// approval (nil elsewhere): the refunds already made on the order, the
	// approval this one replaces, whether the caller may approve it now
	// and, when not, the Code that says why (forbidden_role,
	// requester_cannot_approve, approver_not_lead, approver_outside_region,
	// above_approver_limit, approval_expired, not_pending).
	OrderRefunded *money.Cents      `json:"order_refunded,omitempty"`
	Replaces      *ReplacedApproval `json:"replaces,omitempty"`
	CanApprove    *bool             `json:"can_approve,omitempty"`
	Code          string            `json:"code,omitempty"`
}

// ReplacedApproval is the earlier approval of the same step that an
// approval replaces after an amendment or expiry: its call beside the new.
type ReplacedApproval struct {
	ID       string         `json:"id"`
	Args     Args           `json:"args"`
	Status   ApprovalStatus `json:"status"`
	CallHash string         `json:"call_hash"`
}

// ApprovalList is GET /v1/approvals; [] when nothing matches.
type ApprovalList struct {
	Approvals []Approval `json:"approvals"`
}

// ApprovalQuery filters GET /v1/approvals. An empty Status lists every
// status; All asks a lead for the whole queue rather than only what they
// may approve.
type ApprovalQuery struct {
	Status ApprovalStatus
	All    bool
	// Approver and Requester keep the approvals decided by, or asked for
	// by, that person (compared as the same-person checks compare ids).
	Approver, Requester string
}

// SwitchList is GET /v1/switches: each tool's switch, true when it may
// run.
type SwitchList struct {
	Switches map[string]bool `json:"switches"`
}

// Switch is one tool's switch (PUT /v1/switches/{tool}).
type Switch struct {
	Tool    string `json:"tool"`
	Enabled bool   `json:"enabled"`
}

// ModeList is GET /v1/modes.
type ModeList struct {
	Modes []Mode `json:"modes"`
}

// Mode is one tool's stage of autonomy: the mode in force for agent
// versions whose breaker has not tripped, the bundle's default, and the
// breakers that hold failures (a tripped one runs the tool in
// approval_only for its agent version until an operator sets the mode).
type Mode struct {
	Tool    string `json:"tool"`
	Mode    string `json:"mode"`
	Default string `json:"default"`
	// SetBy, Reason and SetAt are the operator's last setting; absent
	// while the bundle's default applies.
	SetBy    string     `json:"set_by,omitempty"`
	Reason   string     `json:"reason,omitempty"`
	SetAt    *time.Time `json:"set_at,omitempty"`
	Breakers []Breaker  `json:"breakers"`
}

// Breaker is one agent version's breaker for a tool. Failures is how
// many failures its window held at the last one.
type Breaker struct {
	AgentVersion string       `json:"agent_version"`
	Failures     int          `json:"failures"`
	Tripped      bool         `json:"tripped"`
	Trip         *BreakerTrip `json:"trip,omitempty"`
}

// BreakerTrip is what tripped a breaker and when.
type BreakerTrip struct {
	At            time.Time `json:"at"`
	Failures      int       `json:"failures"`
	WindowSeconds int64     `json:"window_seconds"`
	Last          string    `json:"last"`
}

// Epoch is POST /v1/credentials/epoch: the credential epoch now.
type Epoch struct {
	Epoch int `json:"epoch"`
}
