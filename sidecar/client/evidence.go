package client

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/countersign/countersign/executor/money"
)

// Evidence reads what the records say about step n of workflow wf: who
// asked, under which policy, who approved, what was paid, and the audit
// records that cover it with the chain's verdict on them. A rep reads
// their own workflows' (another rep's is not_found); leads and operators
// any.
func (c *Client) Evidence(ctx context.Context, wf string, n int) (Evidence, error) {
	var e Evidence
	err := c.call(ctx, http.MethodGet, "/v1/workflows/"+seg(wf)+"/steps/"+strconv.Itoa(n)+"/evidence", nil, nil, &e)
	return e, err
}

// Evidence is GET /v1/workflows/{id}/steps/{n}/evidence.
type Evidence struct {
	Workflow string          `json:"workflow"`
	N        int             `json:"n"`
	Asked    EvidenceAsked   `json:"asked"`
	Call     EvidenceCall    `json:"call"`
	Policy   *EvidencePolicy `json:"policy"`
	// Approval is nil for a step that had none.
	Approval *EvidenceApproval `json:"approval"`
	// Effect is nil for a step that did nothing.
	Effect       *EvidenceEffect      `json:"effect"`
	Records      []EvidenceRecord     `json:"records"`
	Verification EvidenceVerification `json:"verification"`
}

// EvidenceAsked is who asked: the rep whose workflow it is, its ticket,
// the agent version it was opened with, and the agent whose token the
// system of record verified (for an effect).
type EvidenceAsked struct {
	Rep          string    `json:"rep"`
	Ticket       string    `json:"ticket"`
	AgentVersion string    `json:"agent_version,omitempty"`
	Agent        string    `json:"agent,omitempty"`
	Opened       time.Time `json:"opened"`
}

// EvidenceCall is the call as proposed and where it stands.
type EvidenceCall struct {
	Tool        string    `json:"tool"`
	Args        Args      `json:"args"`
	Status      string    `json:"status"`
	Proposed    time.Time `json:"proposed"`
	AgentReason string    `json:"agent_reason,omitempty"`
	// CallHash is the hash an approval of this exact call is bound to.
	CallHash string `json:"call_hash"`
}

// EvidencePolicy is the decision the step's outcome rests on (the last of
// Decisions), as the decision log keeps it.
type EvidencePolicy struct {
	DecisionID string          `json:"decision_id"`
	At         time.Time       `json:"at"`
	Decision   string          `json:"decision"`
	Rule       string          `json:"rule"`
	Revision   string          `json:"revision"`
	Digest     string          `json:"digest"`
	Mode       string          `json:"mode,omitempty"`
	Input      json.RawMessage `json:"input,omitempty"`
	Decisions  int             `json:"decisions"`
}

// EvidenceApproval is the step's approval.
type EvidenceApproval struct {
	ID          string     `json:"id"`
	Status      string     `json:"status"`
	Requester   string     `json:"requester"`
	Approver    string     `json:"approver,omitempty"`
	Comment     string     `json:"comment,omitempty"`
	CallHash    string     `json:"call_hash"`
	Retroactive bool       `json:"retroactive,omitempty"`
	Requested   time.Time  `json:"requested"`
	Decided     *time.Time `json:"decided,omitempty"`
}

// EvidenceEffect is what the system of record answered: for a refund the
// ledger's entry and its amount.
type EvidenceEffect struct {
	Entry  string          `json:"entry,omitempty"`
	Amount money.Cents     `json:"amount"`
	Result json.RawMessage `json:"result"`
}

// EvidenceRecord is an audit record about the step, at its position in the
// chain (from 0).
type EvidenceRecord struct {
	Position int       `json:"position"`
	ID       string    `json:"id"`
	At       time.Time `json:"at"`
	Kind     string    `json:"kind"`
	Actor    string    `json:"actor"`
	Prev     string    `json:"prev"`
	Hash     string    `json:"hash"`
}

// EvidenceVerification is the verdict: OK when every record about the
// step is in the chain and the chain verifies from its start through the
// last of them (Through). Records is the chain's length, Pending the
// step's records a fleet has not chained yet, Broken the chain's first
// broken link wherever it is. Text says it in words.
type EvidenceVerification struct {
	OK      bool `json:"ok"`
	Through *int `json:"through,omitempty"`
	// Checkpoint is the first signed checkpoint covering every record of
	// the step (absent while none does yet); Anchored says the chain
	// matches it and its signature verifies with the store's keys.
	Checkpoint *AuditCheckpoint `json:"checkpoint,omitempty"`
	Anchored   bool             `json:"anchored"`
	Records    int              `json:"records"`
	Pending    int              `json:"pending,omitempty"`
	Broken     *AuditBreak      `json:"broken,omitempty"`
	Text       string           `json:"text"`
}
