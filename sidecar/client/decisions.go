package client

import (
	"context"
	"encoding/json"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Decisions reads one page of the decision log (an operator's or a
// lead's), oldest first. Pass the page's NextCursor as q.Cursor for the
// next; ExportDecisions reads them all.
func (c *Client) Decisions(ctx context.Context, q DecisionQuery) (DecisionPage, error) {
	v := url.Values{}
	if !q.Since.IsZero() {
		v.Set("since", q.Since.Format(time.RFC3339Nano))
	}
	if !q.Until.IsZero() {
		v.Set("until", q.Until.Format(time.RFC3339Nano))
	}
	if q.Workflow != "" {
		v.Set("workflow", q.Workflow)
	}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.Cursor != "" {
		v.Set("cursor", q.Cursor)
	}
	var p DecisionPage
	err := c.call(ctx, http.MethodGet, "/v1/decisions", v, nil, &p)
	return p, err
}

// ExportDecisions reads every decision q selects, page after page of
// q.Limit (the server's default when 0) from q.Cursor: an export of the
// log. It yields a decision at a time; an error ends the sequence with
// that error. Stopping the loop stops the reading.
//
//	for d, err := range c.ExportDecisions(ctx, client.DecisionQuery{Workflow: "W1"}) {
//		if err != nil { ... }
//		...
//	}
func (c *Client) ExportDecisions(ctx context.Context, q DecisionQuery) iter.Seq2[Decision, error] {
	return func(yield func(Decision, error) bool) {
		for {
			p, err := c.Decisions(ctx, q)
			if err != nil {
				yield(Decision{}, err)
				return
			}
			for _, d := range p.Decisions {
				if !yield(d, nil) {
					return
				}
			}
			if p.NextCursor == "" {
				return
			}
			q.Cursor = p.NextCursor
		}
	}
}

// DecisionQuery filters and pages GET /v1/decisions. Zero values leave a
// parameter out: since and until unbounded (since is inclusive, until
// exclusive), every workflow, the server's page size (100, at most 1000),
// the first page.
type DecisionQuery struct {
	Since, Until time.Time
	Workflow     string
	Limit        int
	Cursor       string
}

// DecisionPage is one page of the decision log. NextCursor is "" on the
// last page.
type DecisionPage struct {
	Decisions  []Decision `json:"decisions"`
	NextCursor string     `json:"next_cursor"`
}

// Decision is one decision in the shape of OPA's decision log
// (decision_id, timestamp, path, input, result, bundles), with
// countersign's own fields beside it: the workflow and step, and the
// fields the log had before it took OPA's shape.
type Decision struct {
	// DecisionID is "" for a decision logged before ids were.
	DecisionID string    `json:"decision_id"`
	Timestamp  time.Time `json:"timestamp"`
	// Path is the policy path evaluated: countersign/call/decision.
	Path string `json:"path"`
	// Input is the input document the policy evaluated; absent for a
	// decision logged before inputs were recorded.
	Input   json.RawMessage `json:"input,omitempty"`
	Result  DecisionResult  `json:"result"`
	Bundles DecisionBundles `json:"bundles"`

	Seq      uint64    `json:"seq"`
	At       time.Time `json:"at"`
	Workflow string    `json:"workflow"`
	N        int       `json:"n"`
	User     string    `json:"user"`
	Tool     string    `json:"tool"`
	Args     Args      `json:"args"`
	Decision string    `json:"decision"`
	Rule     string    `json:"rule"`
	Revision string    `json:"revision"`
	// AgentVersion is the workflow's agent version, Mode the tool's mode
	// the decision was acted on under, Shadow whether that was shadow
	// (nothing dispatched).
	AgentVersion string `json:"agent_version,omitempty"`
	Mode         string `json:"mode,omitempty"`
	Shadow       bool   `json:"shadow,omitempty"`
	// Audit is the id of the audit record that covers the decision; on a
	// fleet AuditPending is instead the number that record keeps as its
	// pending once the sequencer has chained it.
	Audit        string `json:"audit,omitempty"`
	AuditPending uint64 `json:"audit_pending,omitempty"`
}

// DecisionResult is the call policy's result object.
type DecisionResult struct {
	Decision string `json:"decision"`
	Rule     string `json:"rule"`
}

// DecisionBundles names the bundle that answered, under the one bundle
// name countersign has.
type DecisionBundles struct {
	Countersign DecisionBundle `json:"countersign"`
}

// DecisionBundle is a bundle as the decision log names it; Digest is ""
// for a decision logged before digests were.
type DecisionBundle struct {
	Revision string `json:"revision"`
	Digest   string `json:"digest"`
}
