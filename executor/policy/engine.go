package policy

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/countersign/countersign/executor/clock"
	"github.com/countersign/countersign/executor/identity"
)

// DefaultTimeout bounds one evaluation unless Options.Timeout says
// otherwise. The shipped policy answers in well under a millisecond; the
// deadline is for a bundle that loops, which would otherwise hold the
// store's writer for as long as it spins.
const DefaultTimeout = 100 * time.Millisecond

// Options configure an Engine. The zero value is usable.
type Options struct {
	// History records every activation attempt. Default: NopHistory.
	History History
	// Clock is the time decisions are evaluated at and activations are
	// recorded with. Nil means the wall clock.
	Clock clock.Clock
	// Timeout bounds every evaluation: each decision and each approver
	// check (and each of the gate's cases, which get at least a
	// second: see gate.caseTimeout). Past it the evaluation fails with
	// ErrTimeout. Default: DefaultTimeout.
	Timeout time.Duration

	// Verifier, when set, requires every bundle activated or restored to
	// carry a signature it verifies (ErrSignatureInvalid otherwise). Nil
	// requires none; a signed bundle then loads without its signature
	// being checked.
	Verifier *Verifier

	// UnrestrictedBuiltins removes a safety control, for the tests that
	// prove the control matters: bundles compile with every OPA built-in
	// (http.send, time.now_ns ...), not Capabilities. The zero value keeps
	// the control on; no flag, file or endpoint sets this.
	UnrestrictedBuiltins bool

	// LimitOnlyLoosening removes a safety control, for the tests that
	// prove the control matters: a bundle then needs a second operator
	// only when a limit change it declares loosens (the second wave's
	// rule), so new rules, approver rules and any other data go live on
	// one operator. The zero value keeps the control on (only a pure
	// tightening goes live on one operator: see Compare); no flag, file or
	// endpoint sets this.
	LimitOnlyLoosening bool
}

// Engine answers policy questions with the active bundle and activates new
// bundles through the gate. It is safe for concurrent use.
type Engine struct {
	active   atomic.Pointer[Bundle]
	history  History
	clock    clock.Clock
	gate     gate
	verifier *Verifier
	// limitOnly is Options.LimitOnlyLoosening.
	limitOnly bool
	// activating runs one activation at a time, from reading the
	// reference limits to the swap, so the gate compares a candidate with
	// the bundle it replaces.
	activating sync.Mutex
	// mu orders activations so that the history's order is the swap order.
	mu sync.Mutex
}

// New returns an engine with no active bundle: every decision fails with
// ErrNoBundle until Activate or Restore installs one.
func New(opts Options) *Engine {
	e := &Engine{history: opts.History, clock: opts.Clock, gate: defaultGate(), verifier: opts.Verifier, limitOnly: opts.LimitOnlyLoosening}
	if e.history == nil {
		e.history = NopHistory{}
	}
	if e.clock == nil {
		e.clock = clock.Wall{}
	}
	if opts.Timeout > 0 {
		e.gate.timeout = opts.Timeout
	}
	e.gate.unrestricted = opts.UnrestrictedBuiltins
	return e
}

// Decide evaluates the call policy. An error means the call must not run.
func (e *Engine) Decide(ctx context.Context, in Input) (Result, error) {
	b := e.active.Load() // one bundle for the whole decision
	if b == nil {
		return Result{}, ErrNoBundle
	}
	return b.decide(ctx, in, e.clock.Now(), e.gate.timeout)
}

// CheckApprover evaluates the approver policy: "" means the approval is
// allowed, otherwise the Refusal says why not. An error means refuse.
func (e *Engine) CheckApprover(ctx context.Context, in ApproverInput) (Refusal, error) {
	b := e.active.Load()
	if b == nil {
		return "", ErrNoBundle
	}
	return b.checkApprover(ctx, in, e.clock.Now(), e.gate.timeout)
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

// Autonomy returns the active bundle's modes and breaker thresholds.
func (e *Engine) Autonomy() (Autonomy, error) {
	b := e.active.Load()
	if b == nil {
		return Autonomy{}, ErrNoBundle
	}
	return b.autonomy, nil
}

// Activation says who activates a bundle and how. Whether By may break the
// glass (the operator role) is for the caller to decide.
type Activation struct {
	By string
	// BreakGlass skips the gate's verdict (the gate still runs, so the
	// record shows what it overrode). It needs a Reason and a second
	// operator.
	BreakGlass bool
	Reason     string
	// Rollback re-activates a bundle that was released before: the
	// request itself declares its limits, so every difference from the
	// active bundle's counts as declared. The gate still runs, at the
	// bundle's own limits.
	Rollback bool
	// Proposer is the operator who proposed a change that needs a second
	// operator (one that is not a pure tightening of the active bundle,
	// or breaks the glass); By is then the second operator, and must be
	// someone else. Empty: By proposes, and such a change waits
	// (ErrAwaitingSecondOperator).
	Proposer string
	// Impact is the replay of recent decisions against the bundle, kept
	// with its record for the second operator and the audit.
	Impact any
	// Review is what the second operator is shown (the differences from
	// the bundle it replaces and what it newly allows), kept with its
	// record.
	Review any
	// Replacing is the digest of the bundle this one replaces when the
	// engine could not load it (the store's active bundle, unsigned where a
	// signature is now required): HistoryRecord.Replaces. Empty, it is the
	// engine's active bundle.
	Replacing string
}

// Activate makes b the active bundle if it passes the gate (Check, against
// the active bundle, or Baseline when none is active). Only a pure
// tightening of that bundle (Compare) goes live on one operator: any
// other bundle, or a break-glass activation (which skips the gate's
// verdict), needs a second operator: without a Proposer it is recorded as
// awaiting one and the error is an *AwaitingError; with a Proposer equal
// to By it is ErrSameOperator. Every attempt is recorded in the history,
// before the swap. A bundle that fails the gate leaves the active one in
// force; the error is a *GateError carrying the Report, which is also
// returned. A bundle that calls a forbidden built-in is refused even with
// break glass (*ForbiddenBuiltinError), and one without Rego tests is
// refused by the gate (ErrNoTests); both are recorded as rejected. With
// Options.Verifier, a bundle it does not verify is refused first, break
// glass or not (ErrSignatureInvalid), and not recorded.
func (e *Engine) Activate(ctx context.Context, b *Bundle, a Activation) (Report, error) {
	if b == nil {
		return Report{}, fmt.Errorf("%w: no bundle to activate", ErrInvalidBundle)
	}
	if a.BreakGlass && strings.TrimSpace(a.Reason) == "" {
		return Report{}, ErrReasonRequired
	}
	if a.Proposer != "" && identity.Same(a.Proposer, a.By) {
		return Report{}, fmt.Errorf("policy: activate %s: %w", b.revision, ErrSameOperator)
	}
	if err := e.verify(b); err != nil {
		return Report{}, fmt.Errorf("policy: activate %s: %w", b.revision, err)
	}
	e.activating.Lock()
	defer e.activating.Unlock()
	report := Report{Revision: b.revision, Digest: b.digest}
	if err := e.gate.admit(b); err != nil {
		return report, e.reject(ctx, b, a, err)
	}
	replaced := e.active.Load()
	ref, err := referenceBundle(replaced)
	if err != nil {
		return report, fmt.Errorf("policy: activate %s: %w", b.revision, err)
	}
	declared := b.changes
	if a.Rollback {
		declared = changesBetween(ref.figures, b.figures)
	}
	report, err = e.gate.check(ctx, b, referenceFrom(ref), declared)
	failures := report.Failures()
	switch {
	case err != nil && a.BreakGlass:
		// The glass is broken over a gate that refused or could not run:
		// the record says so.
		failures = append(failures, refusalCase(err))
	case refused(err):
		return report, e.reject(ctx, b, a, err)
	case err != nil:
		return report, fmt.Errorf("policy: activate %s: %w", b.revision, err)
	}
	why, err := e.secondOperator(ref, b, report)
	if err != nil {
		return report, fmt.Errorf("policy: activate %s: %w", b.revision, err)
	}

	e.mu.Lock()
	defer e.mu.Unlock()
	rec := HistoryRecord{
		Revision:     b.revision,
		Digest:       b.digest,
		Status:       StatusActive,
		By:           a.By,
		Proposer:     a.Proposer,
		At:           e.clock.Now().UTC(),
		BreakGlass:   a.BreakGlass,
		Reason:       a.Reason,
		Rollback:     a.Rollback,
		Changes:      report.Changes,
		Failures:     failures,
		TestFailures: report.TestFailures,
		Impact:       a.Impact,
		Review:       a.Review,
		Bundle:       b.archive,
	}
	switch {
	case a.Replacing != "":
		rec.Replaces = a.Replacing
	case replaced != nil:
		rec.Replaces = replaced.digest
	}
	passed := a.BreakGlass || report.Passed()
	second := a.BreakGlass || len(why) > 0
	switch {
	case !passed:
		rec.Status = StatusRejected
	case second && a.Proposer == "":
		rec.Status = StatusAwaitingSecondOperator
	}
	// Recording comes first: a bundle is never active without its record.
	if err := e.history.Record(ctx, rec); err != nil {
		return report, fmt.Errorf("policy: activate %s: record history: %w", b.revision, err)
	}
	switch rec.Status {
	case StatusRejected:
		return report, &GateError{Report: report}
	case StatusAwaitingSecondOperator:
		return report, &AwaitingError{Revision: b.revision, Digest: b.digest, Loosens: report.Loosens(), Reasons: why, BreakGlass: a.BreakGlass}
	}
	e.active.Store(b)
	return report, nil
}

// secondOperator says why b needs a second operator, one reason a line;
// none when it may go live on one. A declared limit change that loosens
// always needs one; with the control on, so does anything but a pure
// tightening of ref (Compare).
func (e *Engine) secondOperator(ref, b *Bundle, report Report) ([]string, error) {
	if e.limitOnly {
		var why []string
		for _, c := range report.Loosens() {
			why = append(why, "it loosens "+c.String())
		}
		return why, nil
	}
	c, err := Compare(ref, b)
	if err != nil {
		return nil, err
	}
	return c.Reasons(), nil
}

// ChangesBetween lists every limit of own that differs from reference:
// what `bundle history` shows between consecutive revisions. (A rollback
// declares the bounds and breaker thresholds both bundles set as well.)
func ChangesBetween(reference, own Limits) []LimitChange {
	return changesBetween(limitFigures(reference), limitFigures(own))
}

// referenceBundle is what a candidate is compared with: active, the
// active bundle, or the baseline release when none is.
func referenceBundle(active *Bundle) (*Bundle, error) {
	if active != nil {
		return active, nil
	}
	return Baseline()
}

// Reference is the bundle a candidate offered now is compared with: the
// active bundle, or Baseline when none is active.
func (e *Engine) Reference() (*Bundle, error) { return referenceBundle(e.active.Load()) }

// Load reads a bundle archive and, when the engine requires signatures,
// verifies it (ErrSignatureInvalid).
func (e *Engine) Load(archive []byte) (*Bundle, error) {
	b, err := LoadArchive(archive)
	if err != nil {
		return nil, err
	}
	if err := e.verify(b); err != nil {
		return nil, fmt.Errorf("policy: load %s: %w", b.revision, err)
	}
	return b, nil
}

// Preview runs the gate on b as Activate would now, against the active
// bundle's limits, and activates and records nothing.
func (e *Engine) Preview(ctx context.Context, b *Bundle) (Report, error) {
	if err := e.verify(b); err != nil {
		return Report{}, fmt.Errorf("policy: preview %s: %w", b.revision, err)
	}
	ref, err := e.Reference()
	if err != nil {
		return Report{}, fmt.Errorf("policy: preview %s: %w", b.revision, err)
	}
	return e.gate.check(ctx, b, referenceFrom(ref), b.changes)
}

// verify checks b's signature when the engine requires one.
func (e *Engine) verify(b *Bundle) error {
	if e.verifier == nil {
		return nil
	}
	return e.verifier.Verify(b.archive)
}

// reject records a refused activation and returns its error. The refusal
// is the record's one failure, so the history shows why.
func (e *Engine) reject(ctx context.Context, b *Bundle, a Activation, refusal error) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	rec := HistoryRecord{
		Revision: b.revision, Digest: b.digest, Status: StatusRejected, By: a.By, At: e.clock.Now().UTC(),
		BreakGlass: a.BreakGlass, Reason: a.Reason, Failures: []CaseResult{refusalCase(refusal)}, Bundle: b.archive,
	}
	if err := e.history.Record(ctx, rec); err != nil {
		return fmt.Errorf("policy: activate %s: record history: %w", b.revision, err)
	}
	return fmt.Errorf("policy: activate %s: %w", b.revision, refusal)
}

// Restore makes b active without the gate and without a history record.
// It is for start-up only, to load again the bundle the history already
// records as active; anything else goes through Activate. A bundle that
// calls a forbidden built-in is not installed even so (it could only have
// been activated by an engine without the allowlist), nor one that
// Options.Verifier does not verify: the engine stays without a bundle,
// which fails every decision closed.
func (e *Engine) Restore(b *Bundle) error {
	if b == nil {
		return fmt.Errorf("%w: no bundle to restore", ErrInvalidBundle)
	}
	if err := e.verify(b); err != nil {
		return fmt.Errorf("policy: restore %s: %w", b.revision, err)
	}
	if err := e.gate.admit(b); err != nil {
		return fmt.Errorf("policy: restore %s: %w", b.revision, err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.active.Store(b)
	return nil
}
