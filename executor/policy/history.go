package policy

import (
	"context"
	"slices"
	"sync"
	"time"
)

// History records every activation attempt. The engine calls Record before
// it swaps a bundle in, so a bundle is never active without a record; the
// durable implementation lives with the store.
type History interface {
	Record(ctx context.Context, r HistoryRecord) error
}

// Status of a bundle in the history.
type Status string

// Statuses. The engine records Active or Rejected; the store turns the
// previous Active record into Superseded when a new one becomes active.
const (
	StatusActive     Status = "active"
	StatusSuperseded Status = "superseded"
	StatusRejected   Status = "rejected"
	// StatusAwaitingSecondOperator: it passed the gate (or breaks the
	// glass) and is not a pure tightening of the bundle it replaces;
	// another operator must approve it.
	StatusAwaitingSecondOperator Status = "awaiting_second_operator"
	// StatusApproved: it was awaiting a second operator, who approved it;
	// the activation is a record of its own.
	StatusApproved Status = "approved"
)

// HistoryRecord is one activation attempt.
type HistoryRecord struct {
	Revision string `json:"revision"`
	Digest   string `json:"digest"`
	Status   Status `json:"status"`
	By       string `json:"by"`
	// Proposer is the operator who proposed it when By is the second
	// operator who approved it.
	Proposer   string    `json:"proposer,omitempty"`
	At         time.Time `json:"at"`
	BreakGlass bool      `json:"break_glass,omitempty"`
	Reason     string    `json:"reason,omitempty"`
	Rollback   bool      `json:"rollback,omitempty"`
	// Changes are the limit changes declared (by the manifest, or by the
	// rollback); Impact the replay of recent decisions, when one was made.
	Changes []LimitChange `json:"limit_changes,omitempty"`
	Impact  any           `json:"impact,omitempty"`
	// Review is what the second operator is shown (Activation.Review).
	Review any `json:"review,omitempty"`
	// Failures are the gate's failures (Report.Failures); TestFailures its own
	// Rego tests that failed. Both are empty for a break-glass activation,
	// which skips the gate.
	Failures     []CaseResult `json:"failures,omitempty"`
	TestFailures []string     `json:"test_failures,omitempty"`
	// Bundle is the .tar.gz, so that a restart can load the active bundle
	// again with LoadArchive.
	Bundle []byte `json:"bundle,omitempty"`
	// Replaces is the digest of the active bundle the gate compared this
	// one with, "" when none was active. A history several sidecars share
	// refuses to make this one active when another has been activated
	// since: the comparison no longer holds.
	Replaces string `json:"-"`
}

// NopHistory records nothing. For tools such as `bundle test` that never
// activate, and tests that do not look at history.
type NopHistory struct{}

// Record implements History.
func (NopHistory) Record(context.Context, HistoryRecord) error { return nil }

// MemHistory keeps records in memory, with the store's superseding rule.
// For tests and for runs that need no durability.
type MemHistory struct {
	mu      sync.Mutex
	records []HistoryRecord
}

// Record implements History.
func (h *MemHistory) Record(_ context.Context, r HistoryRecord) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if r.Status == StatusActive {
		for i := range h.records {
			if h.records[i].Status == StatusActive {
				h.records[i].Status = StatusSuperseded
			}
		}
	}
	h.records = append(h.records, r)
	return nil
}

// Records returns the records, oldest first.
func (h *MemHistory) Records() []HistoryRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.records)
}

var (
	_ History = NopHistory{}
	_ History = (*MemHistory)(nil)
)
