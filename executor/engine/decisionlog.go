package engine

import (
	"cmp"
	"encoding/json"
	"fmt"
	"time"

	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/strictjson"
	"github.com/countersign/countersign/executor/tool"
)

// DecisionPath is the policy path of every decision the engine logs, as
// OPA's decision log writes it: the call policy's query,
// data.countersign.call.decision.
const DecisionPath = "countersign/call/decision"

// LogEntry is one decision in the shape of OPA's decision log
// (decision_id, timestamp, path, input, result, bundles), which tools that
// read OPA decision logs accept, with countersign's own fields beside it:
// the workflow and step, and the fields the log had before it took OPA's
// shape (seq, at, user, tool, args, decision, rule, revision), kept for its
// existing readers. It is the API's answer and a line of
// `countersign decisions export`.
type LogEntry struct {
	DecisionID string    `json:"decision_id"`
	Timestamp  time.Time `json:"timestamp"`
	Path       string    `json:"path"`
	// Input is the input document the policy evaluated; absent for a
	// decision logged before inputs were recorded.
	Input   json.RawMessage `json:"input,omitempty"`
	Result  LogResult       `json:"result"`
	Bundles LogBundles      `json:"bundles"`

	Seq      uint64    `json:"seq"`
	At       time.Time `json:"at"`
	Workflow string    `json:"workflow"`
	N        int       `json:"n"`
	User     string    `json:"user"`
	Tool     tool.Name `json:"tool"`
	Args     tool.Args `json:"args"`
	Decision string    `json:"decision"`
	Rule     string    `json:"rule"`
	Revision string    `json:"revision"`
	// AgentVersion is the workflow's agent version, Mode the tool's mode
	// the decision was acted on under, Shadow whether that was shadow
	// (nothing dispatched).
	AgentVersion string `json:"agent_version,omitempty"`
	Mode         string `json:"mode,omitempty"`
	Shadow       bool   `json:"shadow,omitempty"`
	// Audit and AuditPending name the audit record that covers the
	// decision (store.Decision).
	Audit        string `json:"audit,omitempty"`
	AuditPending uint64 `json:"audit_pending,omitempty"`
}

// LogResult is the call policy's result object.
type LogResult struct {
	Decision string `json:"decision"`
	Rule     string `json:"rule"`
}

// LogBundles names the bundle that answered, under the one bundle name
// countersign has.
type LogBundles struct {
	Countersign LogBundle `json:"countersign"`
}

// LogBundle is a bundle as the decision log names it. Digest is the sha256
// of its .tar.gz, empty for a decision logged before digests were.
type LogBundle struct {
	Revision string `json:"revision"`
	Digest   string `json:"digest"`
}

// NewLogEntry shows a stored decision in the decision log's shape. A
// decision logged before the log took OPA's shape gets what can be derived
// (the timestamp, the path, which was always DecisionPath, the result and
// the revision) and no decision_id, input or digest.
func NewLogEntry(d store.Decision) LogEntry {
	return LogEntry{
		DecisionID: d.ID, Timestamp: d.At.UTC(), Path: cmp.Or(d.Path, DecisionPath), Input: d.Input,
		Result:  LogResult{Decision: d.Decision, Rule: d.Rule},
		Bundles: LogBundles{Countersign: LogBundle{Revision: d.Revision, Digest: d.Digest}},
		Seq:     d.Seq, At: d.At, Workflow: d.Workflow, N: d.N, User: d.User, Tool: d.Tool, Args: d.Args,
		Decision: d.Decision, Rule: d.Rule, Revision: d.Revision,
		AgentVersion: d.AgentVersion, Mode: d.Mode, Shadow: d.Shadow, Audit: d.Audit, AuditPending: d.AuditPending,
	}
}

// inputDocument is policy.Input as the call policy reads it: the object the
// policy package builds for OPA from an Input, member for member (null for
// a missing user or order, an amount and the scopes even when empty).
type inputDocument struct {
	User   *userDocument  `json:"user"`
	Tool   tool.Name      `json:"tool"`
	Args   argsDocument   `json:"args"`
	Order  *orderDocument `json:"order"`
	Totals totalsDocument `json:"totals"`
	// Workflow is absent from decisions recorded before workflows had
	// bounds; replayed, they are decided without them, as they were.
	Workflow *runDocument `json:"workflow,omitempty"`
	// Now is absent from decisions recorded before the input carried the
	// time; replayed, they are decided without it, as they were.
	Now *nowDocument `json:"now,omitempty"`
}

// nowDocument is policy.Input.Now as the policy sees it. A replay reads
// the time back from ns, to the nanosecond.
type nowDocument struct {
	RFC3339 string `json:"rfc3339"`
	NS      int64  `json:"ns"`
}

// runDocument is policy.Run as the policy sees it.
type runDocument struct {
	Step         int         `json:"step"`
	MaxSteps     int         `json:"max_steps"`
	Spent        money.Cents `json:"spent"`
	MaxSpend     money.Cents `json:"max_spend"`
	PastDeadline bool        `json:"past_deadline"`
	Attempt      int         `json:"attempt"`
	MaxAttempts  int         `json:"max_attempts"`
}

type userDocument struct {
	ID            string      `json:"id"`
	Role          string      `json:"role"`
	Region        string      `json:"region"`
	Scopes        []string    `json:"scopes"`
	RefundCeiling money.Cents `json:"refund_ceiling"`
}

type argsDocument struct {
	Order    string      `json:"order"`
	Amount   money.Cents `json:"amount"`
	Line     string      `json:"line,omitempty"`
	Quantity int64       `json:"quantity,omitempty"`
}

type orderDocument struct {
	ID       string         `json:"id"`
	Region   string         `json:"region"`
	Customer string         `json:"customer"`
	Paid     money.Cents    `json:"paid"`
	Status   string         `json:"status"`
	Lines    []lineDocument `json:"lines"`
	// PlacedAt and ShippedAt are RFC 3339, absent when the record had
	// none (an order not shipped, a decision recorded before orders were
	// dated).
	PlacedAt  string `json:"placed_at,omitempty"`
	ShippedAt string `json:"shipped_at,omitempty"`
}

type lineDocument struct {
	ID               string      `json:"id"`
	SKU              string      `json:"sku"`
	Description      string      `json:"description"`
	UnitAmount       money.Cents `json:"unit_amount"`
	Quantity         int64       `json:"quantity"`
	RefundedQuantity int64       `json:"refunded_quantity"`
}

type totalsDocument struct {
	OrderRefunded money.Cents `json:"order_refunded"`
	RepDay        money.Cents `json:"rep_day"`
	AgentHour     money.Cents `json:"agent_hour"`
	OrderReships  int         `json:"order_reships"`
}

// MarshalInput is the input document the call policy evaluates for in, as
// JSON: what the decision log records as a decision's input.
func MarshalInput(in policy.Input) (json.RawMessage, error) {
	doc := inputDocument{
		Tool: in.Tool, Args: argsDocument{Order: in.Args.Order, Amount: in.Args.Amount, Line: in.Args.Line, Quantity: in.Args.Quantity},
		Totals: totalsDocument{OrderRefunded: in.Totals.OrderRefunded, RepDay: in.Totals.RepDay,
			AgentHour: in.Totals.AgentHour, OrderReships: in.Totals.OrderReships},
	}
	if u := in.User; u != nil {
		doc.User = &userDocument{ID: u.ID, Role: u.Role, Region: u.Region,
			Scopes: append([]string{}, u.Scopes...), RefundCeiling: u.RefundCeiling}
	}
	if o := in.Order; o != nil {
		doc.Order = &orderDocument{ID: o.ID, Region: o.Region, Customer: o.Customer, Paid: o.Paid, Status: o.Status, Lines: []lineDocument{},
			PlacedAt: rfc3339(o.PlacedAt), ShippedAt: rfc3339(o.ShippedAt)}
		for _, l := range o.Lines {
			doc.Order.Lines = append(doc.Order.Lines, lineDocument(l))
		}
	}
	if r := in.Workflow; r != nil {
		doc.Workflow = (*runDocument)(r)
	}
	if !in.Now.IsZero() {
		doc.Now = &nowDocument{RFC3339: policy.RFC3339(in.Now), NS: in.Now.UnixNano()}
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("encode the policy input: %w", err)
	}
	return raw, nil
}

// UnmarshalInput reads back a recorded input document, strictly: a member
// the document does not have, a duplicate or a wrong type is an error.
func UnmarshalInput(raw json.RawMessage) (policy.Input, error) {
	var doc inputDocument
	if err := strictjson.Decode(raw, &doc); err != nil {
		return policy.Input{}, fmt.Errorf("decode a recorded policy input: %w", err)
	}
	in := policy.Input{
		Tool: doc.Tool, Args: tool.Args{Order: doc.Args.Order, Amount: doc.Args.Amount, Line: doc.Args.Line, Quantity: doc.Args.Quantity},
		Totals: policy.Totals{OrderRefunded: doc.Totals.OrderRefunded, RepDay: doc.Totals.RepDay,
			AgentHour: doc.Totals.AgentHour, OrderReships: doc.Totals.OrderReships},
	}
	if u := doc.User; u != nil {
		in.User = &policy.User{ID: u.ID, Role: u.Role, Region: u.Region, Scopes: u.Scopes, RefundCeiling: u.RefundCeiling}
	}
	if o := doc.Order; o != nil {
		in.Order = &policy.Order{ID: o.ID, Region: o.Region, Customer: o.Customer, Paid: o.Paid, Status: o.Status}
		for _, l := range o.Lines {
			in.Order.Lines = append(in.Order.Lines, policy.Line(l))
		}
		var err error
		if in.Order.PlacedAt, err = parseRFC3339("order.placed_at", o.PlacedAt); err != nil {
			return policy.Input{}, err
		}
		if in.Order.ShippedAt, err = parseRFC3339("order.shipped_at", o.ShippedAt); err != nil {
			return policy.Input{}, err
		}
	}
	in.Workflow = (*policy.Run)(doc.Workflow)
	if n := doc.Now; n != nil {
		in.Now = time.Unix(0, n.NS).UTC()
	}
	return in, nil
}

// rfc3339 is t as the input document writes it, "" for the zero time.
func rfc3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return policy.RFC3339(t)
}

// parseRFC3339 reads back a time rfc3339 wrote.
func parseRFC3339(member, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("decode a recorded policy input: %s: %w", member, err)
	}
	return t.UTC(), nil
}
