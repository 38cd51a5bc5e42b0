package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/countersign/countersign/executor/audit"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

// Effects fenced by time (the EffectFence control; the package doc's
// "Effects fenced by time" says why).
//
// A request can land until its actor token expires. So every step keeps a
// token deadline (store.Step.TokenDeadline): it is recorded before any
// token is minted for the step (in the write-ahead transaction, at no
// extra round trip, or durably extended before a later attempt that needs
// a later one), and the dispatcher never mints a token that expires after
// it (Call.NotAfter). The step's resolve time (store.Step.ResolveAfter) is
// that deadline plus the clock skew the receivers are allowed: after it no
// request of the step can land.
//
// Until then a lookup that finds no effect proves nothing, so the step
// keeps its reservation: a reshipment found absent waits (awaitResolve);
// a refund is sent again only under its idempotency key, which the ledger
// answers with the first entry; and a 5xx, a timeout or a refusal of a
// later attempt releases nothing, since an earlier request may still land.
// After it, a lookup that finds nothing is proof: the call is sent again
// with a fresh token, and only the outcome of that attempt, which no other
// request can overtake, may release the reservation (a refusal) or end the
// step.

// dispatchTTL is the life of the tokens of one dispatch: Options.TokenTTL,
// or the active bundle's token_ttl_seconds when that is shorter.
func (e *Engine) dispatchTTL() time.Duration {
	ttl := e.tokenTTL
	if lim, err := e.policy.Limits(); err == nil && lim.TokenTTL > 0 && lim.TokenTTL < ttl {
		ttl = lim.TokenTTL
	}
	return ttl
}

// setDeadline gives s a token deadline a dispatch TTL after now, and the
// resolve time that follows from it. Neither ever moves back: a token
// minted under the earlier deadline may still be out.
func (e *Engine) setDeadline(s *store.Step, now time.Time) {
	if d := now.Add(e.dispatchTTL()); d.After(s.TokenDeadline) {
		s.TokenDeadline = d
	}
	if r := s.TokenDeadline.Add(e.skew); r.After(s.ResolveAfter) {
		s.ResolveAfter = r
	}
}

// legacyTokenLife bounds the tokens of a step stored before token
// deadlines were recorded: none could live longer than the receivers'
// lifetime check allows.
const legacyTokenLife = 120 * time.Second

// resolveAt is when no request of s can land any more: its resolve time,
// or for a step reserved before deadlines were recorded, the longest a
// token minted then could live after the reservation, plus the skew.
func (e *Engine) resolveAt(s store.Step) time.Time {
	if !s.ResolveAfter.IsZero() || s.ReservedAt.IsZero() {
		return s.ResolveAfter
	}
	return s.ReservedAt.Add(legacyTokenLife + e.skew)
}

// mayStillLand reports whether a request of s may still land at now.
func (e *Engine) mayStillLand(s store.Step, now time.Time) bool {
	return now.Before(e.resolveAt(s))
}

// extendDeadline makes sure the deadline of s leaves the attempt about to
// be dispatched at least half a dispatch TTL: when it does not (a retry,
// a resume, a takeover), it records a later one durably before anything
// is minted under it. On the happy path the write-ahead transaction has
// just set it, and nothing is written.
func (e *Engine) extendDeadline(s store.Step) (store.Step, error) {
	ttl, now := e.dispatchTTL(), e.clock.Now()
	if s.TokenDeadline.Sub(now) >= ttl/2 {
		return s, nil
	}
	e.setDeadline(&s, now)
	err := e.db.Batch(func(tx *store.Tx) error { return e.putStep(tx, s) })
	if err != nil {
		return s, fmt.Errorf("extend the token deadline of %s/%d: %w", s.Workflow, s.N, err)
	}
	return s, nil
}

// stillLanding is the resolve time of the requests sent for s before the
// attempt about to be made, when one of them may still land at now; zero
// when none can (or the EffectFence control is removed). An attempt's
// refusal then proves nothing about them (outcome).
func (e *Engine) stillLanding(s store.Step, now time.Time) time.Time {
	if !e.controls.EffectFence || !e.mayStillLand(s, now) {
		return time.Time{}
	}
	return e.resolveAt(s)
}

// awaitResolve leaves s as it is (started or unknown) because what was
// sent for it may still land, saying so in its note, and notes its
// resolve time so that the workflow's lease is parked until then: a
// resume, or on a fleet the sweeper, resolves it after it.
func (e *Engine) awaitResolve(s store.Step, absent string) (store.Step, error) {
	at := e.resolveAt(s)
	e.awaitUntil(s.Workflow, at)
	note := fmt.Sprintf("outcome not known yet: %s, and a request sent for it may still land until %s (resolve_after), "+
		"so it is neither taken as absent nor sent again before then; a resume, or the fleet's sweeper, resolves it after that",
		absent, at.UTC().Format(time.RFC3339))
	if s.Note == note {
		return s, nil
	}
	s.Note = note
	return s, e.db.Batch(func(tx *store.Tx) error { return e.putStep(tx, s) })
}

// awaitUntil notes that a step of wf waits until at to be resolved.
func (e *Engine) awaitUntil(wf string, at time.Time) {
	e.heldMu.Lock()
	defer e.heldMu.Unlock()
	if cur, ok := e.awaiting[wf]; !ok || at.Before(cur) {
		e.awaiting[wf] = at
	}
}

// proven is the note of a step whose effect was proven absent and which is
// dispatched again.
func (e *Engine) proven(s store.Step, absent string) string {
	return fmt.Sprintf("proven absent: every token minted for it expired by %s and %s; dispatching again with a fresh token",
		e.resolveAt(s).UTC().Format(time.RFC3339), absent)
}

// resolveEffect is recover for a reshipment looked up by its reference
// and not found, with the EffectFence control: it waits while a request
// of it may still land, and then sends it again.
func (e *Engine) resolveEffect(ctx context.Context, w store.Workflow, s store.Step, absent string, start time.Time) (store.Step, error) {
	if e.mayStillLand(s, e.clock.Now()) {
		return e.awaitResolve(s, absent)
	}
	return e.dispatchAgain(ctx, w, s, nil, e.proven(s, absent), start)
}

// releaseOnProof is recover for a step whose last attempt did nothing
// (store.Step.ReleaseOnProof). While a request sent before it may still
// land, nothing is sent and nothing released. After that, the lookup by
// key or reference decides: found, an earlier request landed and the step
// is done; not found, its effect is proven absent, the reservation is
// released, and the step is returned pending for run to decide again.
func (e *Engine) releaseOnProof(ctx context.Context, s store.Step, earlier, start time.Time) (store.Step, error) {
	if !earlier.IsZero() {
		return e.awaitResolve(s, "its last attempt did nothing, and an earlier one may still have an effect")
	}
	result, found, absent, err := e.lookupEffect(ctx, s)
	switch {
	case err != nil:
		return s, fmt.Errorf("resolve %s/%d: %w: %v", s.Workflow, s.N, ErrUnavailable, err)
	case found:
		s.Note = "resolved by lookup: an earlier request took effect"
		return e.record(s, result, nil, time.Time{}, start)
	}
	s.Status, s.ReservedAt, s.Baseline, s.ReleaseOnProof = store.StepPending, time.Time{}, nil, false
	s.Note = fmt.Sprintf("proven absent: every token minted for it expired by %s and %s; the reservation is released and the call decided again",
		e.resolveAt(s).UTC().Format(time.RFC3339), absent)
	err = e.db.Batch(func(tx *store.Tx) error {
		if err := e.auditTx(tx, stepRecord(audit.KindResult, audit.ActorEngine, s, map[string]any{"status": string(s.Status), "note": s.Note})); err != nil {
			return err
		}
		return e.putStep(tx, s)
	})
	if err == nil {
		e.changes.changed(s.Workflow)
	}
	return s, err
}

// lookupEffect looks for the effect of s in its system of record: a
// refund by its key, a reshipment by its reference (or, with the
// ResolveByReference control removed, by the order's shipment count
// against the baseline). absent says what was not found.
func (e *Engine) lookupEffect(ctx context.Context, s store.Step) (result json.RawMessage, found bool, absent string, err error) {
	switch {
	case s.Tool == tool.IssueRefund:
		result, found, err = e.systems.RefundByKey(ctx, s.Key)
		return result, found, "the ledger has no entry under key " + s.Key, err
	case s.Tool != tool.ReshipOrder:
		return nil, false, "it has no effect to look for", nil
	case e.controls.ResolveByReference:
		ref := shipmentReference(s)
		result, found, err = e.systems.ShipmentByReference(ctx, s.Args.Order, ref)
		return result, found, "no shipment of " + s.Args.Order + " carries reference " + ref, err
	}
	n, err := e.systems.Shipments(ctx, s.Args.Order)
	if err != nil || s.Baseline == nil || n <= *s.Baseline {
		return nil, false, fmt.Sprintf("%s has %d shipment(s), as before the call", s.Args.Order, n), err
	}
	result, _ = json.Marshal(map[string]any{"resolved_by": "lookup", "shipments": n})
	return result, true, "", nil
}
