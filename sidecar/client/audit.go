package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Audit reads one page of the audit log (an operator's), oldest first.
// Pass the page's Next as q.After for the next page.
func (c *Client) Audit(ctx context.Context, q AuditQuery) (AuditPage, error) {
	v := url.Values{}
	if q.After != "" {
		v.Set("after", q.After)
	}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	var p AuditPage
	err := c.call(ctx, http.MethodGet, "/v1/audit", v, nil, &p)
	return p, err
}

// VerifyAudit checks the audit log's hash chain.
func (c *Client) VerifyAudit(ctx context.Context) (AuditVerification, error) {
	var v AuditVerification
	err := c.call(ctx, http.MethodGet, "/v1/audit/verify", nil, nil, &v)
	return v, err
}

// AuditQuery pages GET /v1/audit. Zero values leave a parameter out: the
// start of the log, the server's page size (100, at most 1000).
type AuditQuery struct {
	After string
	Limit int
}

// AuditPage is one page of the audit log. Next is the After of the
// following page, "" when this one reaches the end of the log.
type AuditPage struct {
	Records []AuditRecord `json:"records"`
	Next    string        `json:"next,omitempty"`
}

// AuditRecord is one record of the hash-chained audit log: Prev is the
// Hash of the record before it.
type AuditRecord struct {
	ID       string          `json:"id"`
	At       time.Time       `json:"at"`
	Kind     string          `json:"kind"`
	Actor    string          `json:"actor"`
	Workflow string          `json:"workflow,omitempty"`
	N        int             `json:"n,omitempty"`
	Tool     string          `json:"tool,omitempty"`
	Args     json.RawMessage `json:"args,omitempty"`
	Detail   map[string]any  `json:"detail,omitempty"`
	// Pending is the number a fleet's record waited under before it was
	// chained, which a decision's audit_pending names.
	Pending uint64 `json:"pending,omitempty"`
	// Version is the rule the hash was made by: 1 for RFC 8785 (the
	// record without "hash", canonicalized, sha256); absent for a record
	// made before it (executor/audit's doc says the old rule).
	Version int    `json:"version,omitempty"`
	Prev    string `json:"prev"`
	Hash    string `json:"hash"`
}

// AuditVerification is GET /v1/audit/verify: whether the hash chain holds.
type AuditVerification struct {
	OK bool `json:"ok"`
	// Records counts the records of the log, broken or not.
	Records int `json:"records"`
	// Head is the Hash of the last record when the chain holds: kept
	// elsewhere, it lets a later check see a truncated or rewritten tail.
	Head string `json:"head,omitempty"`
	// Unsequenced counts, on a fleet, the records written (durable) but
	// not yet chained by the sequencer, and OldestUnsequenced is the time
	// of the oldest of them.
	Unsequenced       int        `json:"unsequenced,omitempty"`
	OldestUnsequenced *time.Time `json:"oldest_unsequenced,omitempty"`
	// Checkpoints counts the signed checkpoints the chain matches, and
	// Anchored is the last one's position: the records up to it are
	// vouched for by a signature, those after it by the chain alone.
	Checkpoints int    `json:"checkpoints,omitempty"`
	Anchored    uint64 `json:"anchored,omitempty"`
	// Broken is the first broken link, nil when OK.
	Broken *AuditBreak `json:"broken,omitempty"`
}

// AuditBreak is the first broken link of the audit chain.
type AuditBreak struct {
	// Index is the record's position in key order, from 0.
	Index  int    `json:"index"`
	ID     string `json:"id"`
	Reason string `json:"reason"`
}
