package policy

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Options configure an Engine. The zero value is usable.
type Options struct {
	// History records every activation attempt. Default: NopHistory.
	History History
	// Clock is the time decisions are evaluated at and activations are
	// recorded with. Default: time.Now.
	Clock func() time.Time
}

// Engine answers policy questions with the active bundle and activates new
// bundles through the gate. It is safe for concurrent use.
type Engine struct {
	active  atomic.Pointer[Bundle]
	history History
	clock   func() time.Time
	// mu orders activations so that the history's order is the swap order.
	mu sync.Mutex
}

// New returns an engine with no active bundle: every decision fails with
// ErrNoBundle until Activate or Restore installs one.
func New(opts Options) *Engine {
	e := &Engine{history: opts.History, clock: opts.Clock}
	if e.history == nil {
		e.history = NopHistory{}
	}
	if e.clock == nil {
		e.clock = time.Now
	}
	return e
}

// Decide evaluates the call policy. An error means the call must not run.
func (e *Engine) Decide(ctx context.Context, in Input) (Result, error) {
	b := e.active.Load() // one bundle for the whole decision
	if b == nil {
		return Result{}, ErrNoBundle
	}
	return b.decide(ctx, in, e.clock())
}

// CheckApprover evaluates the approver policy: "" means the approval is
// allowed, otherwise the Refusal says why not. An error means refuse.
func (e *Engine) CheckApprover(ctx context.Context, in ApproverInput) (Refusal, error) {
	b := e.active.Load()
	if b == nil {
		return "", ErrNoBundle
	}
	return b.checkApprover(ctx, in, e.clock())
}

// Active returns the active bundle, or nil.
func (e *Engine) Active() *Bundle { return e.active.Load() }

// Revision returns the active bundle's revision, or "" when none is active.
func (e *Engine) Revision() string {
	if b := e.active.Load(); b != nil {
		return b.revision
	}
	return ""
}

// Limits returns the active bundle's limits.
func (e *Engine) Limits() (Limits, error) {
	b := e.active.Load()
	if b == nil {
		return Limits{}, ErrNoBundle
	}
	return b.limits, nil
}

// Activation says who activates a bundle and how. Whether By may break the
// glass (the operator role) is for the caller to decide.
type Activation struct {
	By string
	// BreakGlass skips the gate. It needs a Reason and is recorded as such.
	BreakGlass bool
	Reason     string
}

// Activate makes b the active bundle if it passes the gate (Check), or
// unconditionally for a break-glass activation. Every attempt is recorded
// in the history, before the swap. A bundle that fails the gate leaves the
// active one in force; the error is a *GateError carrying the Report, which
// is also returned.
func (e *Engine) Activate(ctx context.Context, b *Bundle, a Activation) (Report, error) {
	if b == nil {
		return Report{}, fmt.Errorf("%w: no bundle to activate", ErrInvalidBundle)
	}
	if a.BreakGlass && strings.TrimSpace(a.Reason) == "" {
		return Report{}, ErrReasonRequired
	}
	report := Report{Revision: b.revision, Digest: b.digest}
	if !a.BreakGlass {
		var err error
		if report, err = Check(ctx, b); err != nil {
			return report, fmt.Errorf("policy: activate %s: %w", b.revision, err)
		}
	}

	e.mu.Lock()
	defer e.mu.Unlock()
	rec := HistoryRecord{
		Revision:     b.revision,
		Digest:       b.digest,
		Status:       StatusActive,
		By:           a.By,
		At:           e.clock().UTC(),
		BreakGlass:   a.BreakGlass,
		Reason:       a.Reason,
		Failures:     report.Failures(),
		TestFailures: report.TestFailures,
		Bundle:       b.archive,
	}
	passed := a.BreakGlass || report.Passed()
	if !passed {
		rec.Status = StatusRejected
	}
	// Recording comes first: a bundle is never active without its record.
	if err := e.history.Record(ctx, rec); err != nil {
		return report, fmt.Errorf("policy: activate %s: record history: %w", b.revision, err)
	}
	if !passed {
		return report, &GateError{Report: report}
	}
	e.active.Store(b)
	return report, nil
}

// Restore makes b active without the gate and without a history record.
// It is for start-up only, to load again the bundle the history already
// records as active; anything else goes through Activate.
func (e *Engine) Restore(b *Bundle) {
	if b == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.active.Store(b)
}
