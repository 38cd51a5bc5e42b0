package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/countersign/countersign/executor/audit"
	"github.com/countersign/countersign/executor/credential"
	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

// Binding is sha256(workflow, tool, canonical args): what an approval is
// bound to, and the stable idempotency key of a refund.
func Binding(wf string, name tool.Name, a tool.Args) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n", wf, name)
	h.Write(tool.Canonical(name, a))
	return hex.EncodeToString(h.Sum(nil))
}

// idempotencyKey is stable across retries, restarts and repeated
// proposals of the same call in the same workflow.
func idempotencyKey(wf string, name tool.Name, a tool.Args) string {
	if name != tool.IssueRefund {
		return ""
	}
	return "cs-" + Binding(wf, name, a)[:40]
}

// normalize applies the tool's schema, strictly unless the StrictSchema
// control is removed, in which case a claimed approver is returned too.
func (e *Engine) normalize(name tool.Name, raw json.RawMessage) (tool.Args, string, error) {
	if e.controls.StrictSchema {
		a, err := tool.Normalize(name, raw)
		return a, "", err
	}
	a, extra, err := tool.Lenient(name, raw)
	var claimed string
	if v, ok := extra["approved_by"]; ok {
		_ = json.Unmarshal(v, &claimed)
	}
	return a, claimed, err
}

// Propose adds a call to workflow wfID for rep p and runs it at once. The
// same call again in the workflow is suppressed and names the first. A call
// that runs at once is admitted, decided and reserved in one transaction.
func (e *Engine) Propose(ctx context.Context, p Person, wfID string, name tool.Name, raw json.RawMessage) (store.Step, error) {
	return e.ProposeWithReason(ctx, p, wfID, name, raw, "")
}

// ProposeWithReason is Propose with the agent's reason for the call, in
// its own words (at most MaxAgentReason characters; "" for none). It is
// kept on the step and on its approval for the people who read them, and
// never given to the policy.
func (e *Engine) ProposeWithReason(ctx context.Context, p Person, wfID string, name tool.Name, raw json.RawMessage, reason string) (store.Step, error) {
	return e.proposeIn(ctx, p, wfID, name, raw, reason, nil)
}

// proposeIn is ProposeWithReason, opening the workflow with open when it
// does not exist yet (nil: it must).
func (e *Engine) proposeIn(ctx context.Context, p Person, wfID string, name tool.Name, raw json.RawMessage, reason string, open *opening) (store.Step, error) {
	if err := checkAgentReason(reason); err != nil {
		return store.Step{}, err
	}
	args, claimed, err := e.normalize(name, raw)
	if err == nil {
		args, err = e.price(ctx, p, name, args)
	}
	if err != nil && !errors.Is(err, ErrUnavailable) {
		e.schemaFailure(p, wfID, open, name, err) // the proposal's own flaw, not the order system's
	}
	if err != nil {
		return store.Step{}, err
	}
	st := stated{claimed: claimed, reason: reason, open: open}
	var pr planRead
	release, err := e.lockWith(ctx, wfID, pr.under(e, p, wfID, name, args, st))
	if err != nil {
		return store.Step{}, err
	}
	defer release()
	s, err := e.propose(ctx, p, wfID, name, args, st, pr)
	return s, e.fencedOff(wfID, err)
}

// ProposeOpening is ProposeWithReason into workflow nw.ID, which it opens
// first, as OpenWorkflow would, when no workflow has that id yet: the
// workflow is created in the very transaction that admits the step (and,
// when it runs at once, decides and reserves it), so no crash leaves a
// workflow without its first step, and one request does what two did.
// An id in use is proposed into when rep p opened it with the same
// ticket, agent version and bounds, and is ErrWorkflowExists otherwise,
// as OpenWorkflow answers; a retry of the same request is so a duplicate
// call in the workflow it opened. nw.ID must be given.
func (e *Engine) ProposeOpening(ctx context.Context, p Person, nw NewWorkflow, name tool.Name, raw json.RawMessage, reason string) (store.Step, error) {
	if nw.ID == "" {
		return store.Step{}, &InvalidError{Field: "id", Problem: "required: the workflow to propose into"}
	}
	o, err := e.newOpening(p, nw)
	if err != nil {
		return store.Step{}, err
	}
	return e.proposeIn(ctx, p, nw.ID, name, raw, reason, o)
}

// stated is what a proposal carries beside its call: an approver claimed
// in the arguments (kept only with the StrictSchema control removed), the
// agent's reason for the call, and the workflow it opens if its id is not
// in use yet (nil: none). The policy sees none of them.
type stated struct {
	claimed string
	reason  string
	open    *opening
}

// propose is Propose under the workflow's lock.
func (e *Engine) propose(ctx context.Context, p Person, wfID string, name tool.Name, args tool.Args, st stated, pr planRead) (store.Step, error) {
	start := time.Now()
	pl := e.plan(ctx, p, pr)
	if pl.past {
		if err := e.endPastDeadline(wfID); err != nil {
			return store.Step{}, err
		}
	}
	r, err := e.decideBatch(ctx, lane(name, args), &pl.v, func(tx *store.Tx) (reservation, error) {
		return e.admitAndReserve(ctx, tx, p, wfID, name, args, st, pl)
	})
	if err != nil {
		return r.step, err
	}
	e.changes.changed(wfID)
	switch {
	case pl.err != nil:
		return r.step, pl.err // admitted; the facts could not be read: resume retries
	case r.failed != nil:
		return r.step, r.failed // admitted; the policy failed: resume retries
	case r.step.Status == store.StepPending:
		// Admitted without a verdict (the plan saw it otherwise): run it
		// the long way.
		return e.run(ctx, wfID, r.step.N, &p)
	case r.atAdmission:
		return r.step, nil // ended at admission (suppressed, or held by the switch)
	}
	return e.reserved(ctx, pl.w, r, start)
}

// proposal is what Propose works out before its write transaction: the
// workflow as it will run the step, the facts and the verdict. ready is
// false when the step will not run at once, or when err says why its facts
// could not be read. past says the workflow's deadline had passed.
type proposal struct {
	w     store.Workflow
	f     facts
	v     verdict
	ready bool
	err   error
	past  bool
	// held is what the plan read of the workflow's own records, for the
	// decision to take as read (store.Tx.Assume) under a fenced lease.
	held store.Held
}

// plan reads how wfID would admit the call and, if it would run at once,
// reads its facts and decides outside the writer, on what pr read.
func (e *Engine) plan(ctx context.Context, p Person, pr planRead) proposal {
	pl := e.planned(credential.WithEpochRead(ctx, pr.epoch), p, pr.w, pr.s, pr.r)
	pl.past, pl.held = pr.past, pr.held
	return pl
}

// planRead is what a proposal reads from the store as it takes the
// workflow's lock (Engine.lockWith): the workflow as it takes the call
// (p's, or one p opens), the step, whether the deadline had passed, and,
// for a step that runs at once, what the verdict needs, the credential
// epoch and the workflow's own records for the decision to take as read.
// On PostgreSQL all of it rides with the lease: two round trips.
type planRead struct {
	now   time.Time
	w     store.Workflow
	s     store.Step
	r     *reading
	past  bool
	epoch uint64
	held  store.Held
}

// under is how pr is read under the lock of workflow wfID.
func (pr *planRead) under(e *Engine, p Person, wfID string, name tool.Name, args tool.Args, st stated) underLock {
	call := store.Step{Workflow: wfID, Tool: name, Args: args, Call: tool.CallHash(name, args)}
	return underLock{
		reads: func() []store.Read {
			pr.now = e.clock.Now()
			return e.reads(store.Workflow{ID: wfID, User: p.ID}, call, pr.now)
		},
		fn: func(tx *store.Tx) (err error) {
			*pr = planRead{now: pr.now}
			var create bool
			if pr.w, _, create, pr.s, err = e.admit(tx, p, wfID, name, args, st); err != nil {
				return err
			}
			if lim, err := e.policy.Limits(); err == nil && !create {
				pr.past = pastDeadline(e.boundsOf(pr.w, lim), pr.now)
			}
			if pr.s.Status == store.StepPending {
				rd := e.read(tx, pr.w, pr.s, pr.now)
				pr.r, pr.epoch = &rd, epochIn(tx)
				pr.held = tx.Held(store.ReadWorkflow(wfID), store.ReadCall(wfID, pr.s.Call), store.ReadSteps(wfID))
			}
			return nil
		},
	}
}

// planned is how step s of workflow w, admitted for p, runs: at once
// (ready) with its facts and a verdict made outside the writer, or not
// (it is not pending, its delegation expired, or err says why its facts
// could not be read). The verdict is made on r, or on a reading of its
// own (nil).
func (e *Engine) planned(ctx context.Context, p Person, w store.Workflow, s store.Step, r *reading) proposal {
	pl := proposal{w: w}
	if s.Status != store.StepPending || e.expired(w.Delegation, e.clock.Now()) {
		return pl
	}
	pl.w.Delegation = e.narrowed(pl.w.Delegation, &p)
	if pl.f, pl.err = e.rehydrate(ctx, pl.w, s); pl.err != nil {
		return pl
	}
	if r == nil {
		pl.v = e.preDecide(ctx, pl.w, s, pl.f)
	} else {
		pl.v = e.decideOn(ctx, pl.w, s, pl.f, *r)
	}
	pl.ready = true
	return pl
}

// admit works out how workflow wfID takes a new call from p: the workflow
// with the delegation p's token refreshes (refreshed: it changed), or as
// st.open opens it (create: it is new), and the step as it is to be stored.
func (e *Engine) admit(tx *store.Tx, p Person, wfID string, name tool.Name, args tool.Args, st stated) (w store.Workflow, refreshed, create bool, s store.Step, err error) {
	if st.open == nil {
		w, err = e.ownWorkflow(tx, p, wfID)
	} else {
		w, create, err = e.opened(tx, p, st.open)
	}
	if err != nil {
		return w, false, false, s, err
	}
	w, refreshed = e.refreshed(w, p)
	s = store.Step{
		Workflow: wfID, N: w.Steps + 1, Tool: name, Args: args, Status: store.StepPending,
		Call: tool.CallHash(name, args), Key: idempotencyKey(wfID, name, args),
		ClaimedApprover: st.claimed, AgentReason: st.reason, Created: e.clock.Now(),
	}
	if e.controls.RunDedupe {
		if first, err := tx.StepByCall(wfID, s.Call); err == nil {
			s.Status, s.DuplicateOf = store.StepSuppressed, first.N
			s.Note = fmt.Sprintf("the same call as step %d; nothing was dispatched", first.N)
		}
	}
	if !e.controls.CheckSwitchAtExecution && s.Status == store.StepPending && !tx.Switch(string(name)) {
		// The weaker design: the switch is read once, at admission.
		s.Status, s.Note, s.Reason = store.StepHeld, "tool switched off at admission", held(name, "")
	}
	return w, refreshed, create, s, nil
}

// admitAndReserve stores the admitted step and, when it runs at once and
// the plan is ready, decides and reserves it in the same transaction. It is
// re-runnable: everything comes from tx and pl.
func (e *Engine) admitAndReserve(ctx context.Context, tx *store.Tx, p Person, wfID string, name tool.Name, args tool.Args, st stated, pl proposal) (reservation, error) {
	var r reservation
	if pl.ready {
		if e.leases != nil {
			// The workflow's own records, as the plan read them under
			// this sidecar's lease: nobody else writes them, and the
			// fence check fails the transaction if it was taken over.
			tx.Assume(pl.held)
		}
		e.prefetch(tx, pl.w, store.Step{Workflow: wfID, N: pl.w.Steps + 1, Tool: name, Args: args, Call: tool.CallHash(name, args)}, pl.v.now,
			decisionNumbers(st.open != nil)...)
	}
	w, refreshed, create, s, err := e.admit(tx, p, wfID, name, args, st)
	if err != nil {
		return r, err
	}
	switch {
	case create:
		if err := e.openTx(tx, w); err != nil {
			return r, err
		}
	case refreshed:
		if err := tx.PutWorkflow(w); err != nil {
			return r, err
		}
	}
	if s.Status != store.StepPending {
		if err := e.auditTx(tx, stepRecord(audit.KindResult, p.ID, s, map[string]any{"status": string(s.Status), "note": s.Note})); err != nil {
			return r, err
		}
	}
	r.step, r.atAdmission = s, s.Status != store.StepPending
	if err := e.putStep(tx, s); err != nil || s.Status != store.StepPending || !pl.ready {
		return r, err
	}
	return e.decideAdmitted(ctx, tx, p, w, r, pl)
}

// openTx creates workflow w in tx, the transaction that admits its first
// step, under the active bundle (a *staleBundle otherwise: the caller
// follows it and runs again). The failpoint after_open is reached with
// the workflow written and its step not yet: a crash there commits
// neither.
func (e *Engine) openTx(tx *store.Tx, w store.Workflow) error {
	if err := e.stale(tx); err != nil {
		return err
	}
	if err := e.createWorkflow(tx, w); err != nil {
		return err
	}
	return e.fail("after_open")
}

// decideAdmitted decides and reserves r's step, just admitted or amended
// in tx, on the facts and verdict of pl, under w's delegation narrowed by
// p's token; a step whose delegation expired is held instead. The
// approvals r changed stay among those the reservation changed.
func (e *Engine) decideAdmitted(ctx context.Context, tx *store.Tx, p Person, w store.Workflow, r reservation, pl proposal) (reservation, error) {
	var err error
	if e.expired(w.Delegation, pl.v.now) {
		r.step, err = e.holdTx(tx, w.ID, r.step.N, NoteDelegationExpired)
		return r, err
	}
	w.Delegation = e.narrowed(w.Delegation, &p)
	d, err := e.decideAndReserve(ctx, tx, w, r.step.N, pl.f, pl.v)
	var u *undecided
	if errors.As(err, &u) {
		// The policy failed before the decision wrote anything: the step
		// is admitted and stays pending, resumable, as if decided apart.
		r.failed = err
		return r, nil
	}
	d.changed = append(r.changed, d.changed...)
	return d, err
}

// undecided is a decision that failed before writing anything (the policy
// or its limits failed): the transaction holds what it held before.
type undecided struct{ err error }

func (u *undecided) Error() string { return u.err.Error() }
func (u *undecided) Unwrap() error { return u.err }

// price sets the amount of a line-item refund from the order record, read
// with p's lookup token: the line's unit amount times the quantity. An
// amount the agent sent must equal it (*AmountMismatch). A line the record
// cannot price (no order p may see, no such line, or a product too large)
// gets no amount, never the agent's: policy then denies it (R2, R12). With
// the LinePricing control removed the line and quantity are dropped and
// the agent's amount stands, as in the first wave.
func (e *Engine) price(ctx context.Context, p Person, name tool.Name, a tool.Args) (tool.Args, error) {
	if name != tool.IssueRefund || !a.IsLine() {
		return a, nil
	}
	if !e.controls.LinePricing {
		return tool.Args{Order: a.Order, Amount: a.Amount}, nil
	}
	sent := a.Amount
	a.Amount = 0
	o, err := e.systems.Order(ctx, Actor{Rep: p.ID, Ceiling: p.RefundCeiling}, a.Order)
	switch {
	case errors.Is(err, ErrOrderNotFound), isRefused(err):
		return a, nil
	case err != nil:
		return a, fmt.Errorf("price line %s of %s: %w: %v", a.Line, a.Order, ErrUnavailable, err)
	}
	l, ok := o.Line(a.Line)
	if !ok || l.UnitAmount <= 0 || l.UnitAmount > tool.MaxAmount/money.Cents(a.Quantity) {
		return a, nil
	}
	a.Amount = l.UnitAmount * money.Cents(a.Quantity)
	if sent != 0 && sent != a.Amount {
		return tool.Args{}, &AmountMismatch{Order: a.Order, Line: a.Line, Quantity: a.Quantity, Sent: sent, Priced: a.Amount}
	}
	return a, nil
}

// Resume re-drives every step of the workflow that has not ended. The
// rep's agent resumes under the rep's token (narrowing the delegation and
// refreshing its expiry); an operator's resume presents no delegation, so
// it runs steps under the stored one and never extends it. It answers the
// workflow as it then stands, read once with the steps' approvals.
func (e *Engine) Resume(ctx context.Context, p Person, wfID string) (Snapshot, error) {
	var refresh bool
	err := e.db.View(func(tx *store.Tx) error {
		w, err := e.readableWorkflow(tx, p, wfID)
		if err == nil && p.Role != RoleOperator && w.User != p.ID {
			err = fmt.Errorf("workflow %q: only its rep's agent or an operator may resume it: %w", wfID, ErrForbidden)
		}
		_, refresh = e.refreshed(w, p)
		return err
	})
	if err == nil && refresh { // most resumes present no later token: no write
		err = e.db.Batch(func(tx *store.Tx) error {
			w, err := tx.Workflow(wfID)
			if err != nil {
				return err
			}
			_, err = e.refreshDelegation(tx, w, p)
			return err
		})
	}
	if err != nil {
		return Snapshot{}, err
	}
	var by *Person
	if p.Role == RoleRep {
		by = &p
	}
	runErr := e.resume(ctx, wfID, true, by)
	snap, err := e.Snapshot(ctx, Person{Role: RoleOperator}, wfID)
	if runErr != nil {
		return snap, runErr
	}
	return snap, err
}

// ResumeAll is run at start: it re-drives the steps a crash may have left
// between decision and record (pending, started, unknown) in every
// workflow. Held steps wait for a person to resume them. It presents no
// token: a pending step whose delegation expired is held, not run. With
// Options.Leases it leaves the workflows another live sidecar drives to
// that sidecar; those whose lease expires later are Sweep's.
func (e *Engine) ResumeAll(ctx context.Context) error {
	var ids []string
	err := e.db.View(func(tx *store.Tx) error {
		open, err := tx.Workflows(func(w store.Workflow) bool {
			return w.Status != store.WorkflowDone && w.Status != store.WorkflowFailed
		})
		if err != nil {
			return err
		}
		for _, w := range open {
			switch held, err := e.heldElsewhere(tx, w.ID); {
			case err != nil:
				return err
			case held.Holder == "":
				ids = append(ids, w.ID)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	var errs []error
	for _, id := range ids {
		if err := e.resume(ctx, id, false, nil); err != nil {
			if errors.Is(err, ErrCrashed) {
				return err
			}
			errs = append(errs, fmt.Errorf("resume %s: %w", id, err))
		}
	}
	return errors.Join(errs...)
}

func (e *Engine) resume(ctx context.Context, wfID string, includeHeld bool, by *Person) error {
	if err := e.endPastDeadlineLocked(ctx, wfID); err != nil {
		return err
	}
	var steps []store.Step
	if err := e.db.View(func(tx *store.Tx) (err error) { steps, err = tx.Steps(wfID); return err }); err != nil {
		return err
	}
	var errs []error
	for _, s := range steps {
		switch s.Status {
		case store.StepHeld, store.StepWaitingApproval:
			if !includeHeld {
				continue
			}
		case store.StepPending, store.StepStarted, store.StepUnknown:
		default:
			continue
		}
		if _, err := e.runLocked(ctx, wfID, s.N, by); err != nil {
			if errors.Is(err, ErrCrashed) || errors.Is(err, ErrFenced) {
				return err // a crash, or another sidecar drives the workflow now
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (e *Engine) runLocked(ctx context.Context, wfID string, n int, by *Person) (store.Step, error) {
	release, err := e.lock(ctx, wfID)
	if err != nil {
		return store.Step{}, err
	}
	defer release()
	s, err := e.run(ctx, wfID, n, by)
	return s, e.fencedOff(wfID, err)
}

// run drives step n as far as it can go now, for by, the rep presenting a
// token (nil: none). The caller holds the workflow's lock.
func (e *Engine) run(ctx context.Context, wfID string, n int, by *Person) (store.Step, error) {
	start := time.Now()
	w, s, err := e.load(wfID, n)
	if err != nil {
		return s, err
	}
	switch s.Status {
	case store.StepStarted, store.StepUnknown:
		if s, err = e.finishEffect(ctx, w, s, start); err != nil || s.Status != store.StepPending {
			return s, err
		}
		// Proven absent after an attempt that did nothing (fence.go): the
		// reservation is released, and the call is decided again below.
	case store.StepPending, store.StepHeld, store.StepWaitingApproval:
	default:
		return s, nil
	}
	if s.Status == store.StepWaitingApproval && e.stillWaiting(s) {
		return s, nil
	}
	if e.expired(w.Delegation, e.clock.Now()) {
		return e.hold(wfID, n, NoteDelegationExpired, start)
	}
	// Everything below, the decision and the actor token, uses the
	// narrowed delegation.
	w.Delegation = e.narrowed(w.Delegation, by)
	f, err := e.rehydrate(ctx, w, s)
	if err != nil {
		return s, err
	}
	v := e.preDecide(ctx, w, s, f)
	r, err := e.decideBatch(ctx, lane(s.Tool, s.Args), &v, func(tx *store.Tx) (reservation, error) {
		e.prefetch(tx, w, s, v.now, decisionNumbers(false)...)
		return e.decideAndReserve(ctx, tx, w, n, f, v)
	})
	if err != nil {
		return r.step, err
	}
	e.changes.changed(wfID)
	return e.reserved(ctx, w, r, start)
}

// reserved tells the observer what the decision transaction did and
// dispatches the step if it was reserved.
func (e *Engine) reserved(ctx context.Context, w store.Workflow, r reservation, start time.Time) (store.Step, error) {
	if r.decided.Seq != 0 {
		e.obs.Decided(r.decided)
	}
	e.tripped(r.tripped)
	e.approvalsChanged(r.changed...)
	if !r.proceed {
		e.finished(r.step, start)
		return r.step, nil
	}
	return e.dispatch(credential.WithEpochRead(ctx, r.epoch), w, r.step, time.Time{}, start)
}

// load reads a workflow and one of its steps.
func (e *Engine) load(wfID string, n int) (w store.Workflow, s store.Step, err error) {
	err = e.db.View(func(tx *store.Tx) error {
		if w, err = tx.Workflow(wfID); err != nil {
			return err
		}
		s, err = tx.Step(wfID, n)
		return err
	})
	return w, s, err
}

// finishEffect goes on with a step whose effect was already decided and
// may have happened (started or unknown), under the stored delegation: a
// narrower token must not turn a replay of a paid refund into a refusal
// that would hide the payment.
func (e *Engine) finishEffect(ctx context.Context, w store.Workflow, s store.Step, start time.Time) (store.Step, error) {
	if e.controls.CheckSwitchAtExecution && !e.switchOn(s.Tool) {
		return s, nil // the effect may have happened: leave it as it is, dispatch nothing
	}
	return e.recover(ctx, w, s, start)
}

// facts are what the decision needs from the systems of record.
type facts struct {
	order    *policy.Order // nil: no order the rep may see
	baseline *int          // shipments before a reship; nil for other tools
}

// rehydrate reads the authoritative facts outside the write transaction,
// with the actor token of w's (narrowed) delegation.
func (e *Engine) rehydrate(ctx context.Context, w store.Workflow, s store.Step) (facts, error) {
	var f facts
	switch o, err := e.systems.Order(ctx, e.actor(w), s.Args.Order); {
	case err == nil:
		f.order = &o
	case errors.Is(err, ErrOrderNotFound), isRefused(err):
		// No order the rep may see: policy denies (R2) on a missing order.
	default:
		return f, fmt.Errorf("rehydrate order %s: %w: %v", s.Args.Order, ErrUnavailable, err)
	}
	if s.Tool == tool.ReshipOrder && f.order != nil {
		n, err := e.systems.Shipments(ctx, s.Args.Order)
		if err != nil {
			return f, fmt.Errorf("baseline of %s: %w: %v", s.Args.Order, ErrUnavailable, err)
		}
		f.baseline = &n
	}
	return f, nil
}

// reservation is the outcome of the decision transaction.
type reservation struct {
	// step is the step as stored, or as far as it got before an error.
	step store.Step
	// proceed: the step is reserved and its effect is to be dispatched.
	proceed bool
	// decided is the logged decision; Seq 0 when none was made.
	decided store.Decision
	// changed are the approvals created, used or voided, for the observer.
	changed []store.Approval
	// atAdmission: a proposal ended when it was admitted, undecided.
	atAdmission bool
	// failed: a proposal was admitted but its decision failed.
	failed error
	// tripped is the breaker this decision's failure tripped, if it did.
	tripped *store.Breaker
	// epoch is the credential epoch the transaction read (epochIn), for
	// the dispatch's token.
	epoch uint64
}

// batch runs fn in a group commit and returns its outcome once durable.
// fn may run more than once: it returns its outcome rather than setting
// anything outside.
func batch[T any](db *store.DB, fn func(*store.Tx) (T, error)) (T, error) {
	var out T
	err := db.Batch(func(tx *store.Tx) (err error) {
		out, err = fn(tx)
		return err
	})
	return out, err
}

// staleBundle is a decision transaction that found the store's active
// bundle is not the one the policy holds: another sidecar activated one.
type staleBundle struct{ digest string }

func (s *staleBundle) Error() string {
	return "the store's active bundle is " + s.digest + ", not the one this sidecar holds"
}

// maxFollows bounds how often one decision follows a newly activated
// bundle before giving up (activations faster than decisions).
const maxFollows = 3

// decideBatch runs fn, a decision transaction, in a batch of lane
// (store.DB.BatchIn), under the fleet's active bundle
// (underActiveBundle); a verdict *v made under an older one is forgotten.
func (e *Engine) decideBatch(ctx context.Context, lane string, v *verdict, fn func(*store.Tx) (reservation, error)) (reservation, error) {
	var r reservation
	runs := 0
	err := e.underActiveBundle(ctx, func() (err error) {
		if runs++; runs > 1 {
			v.ok = false // decided under the old bundle: decide again inside
		}
		return e.db.BatchIn(lane, func(tx *store.Tx) (err error) {
			if r, err = fn(tx); err == nil && r.proceed {
				r.epoch = epochIn(tx)
			}
			return err
		})
	})
	return r, err
}

// lane is the store lane of a decision on a call (store.DB.BatchIn): the
// totals it reads and then writes. Every refund spends the agent's hour,
// so the refunds' decisions share one lane; a reshipment counts for its
// order.
func lane(name tool.Name, a tool.Args) string {
	switch name {
	case tool.IssueRefund:
		return "the agent's hour"
	case tool.ReshipOrder:
		return "reships of " + a.Order
	}
	return ""
}

// underActiveBundle runs tx, a transaction that asks the policy inside it
// after checking e.stale; when that finds the store's active bundle newer
// than the policy's (only with Options.Follow: another sidecar activated
// it), it loads that bundle and runs tx again.
func (e *Engine) underActiveBundle(ctx context.Context, tx func() error) error {
	for follows := 0; ; follows++ {
		err := tx()
		var sb *staleBundle
		if !errors.As(err, &sb) || follows == maxFollows {
			return err
		}
		if err := e.follow(ctx); err != nil {
			return fmt.Errorf("follow the fleet's active bundle %s: %w", sb.digest, err)
		}
	}
}

// stale returns a *staleBundle when the store records another bundle as
// active than the policy holds, with Options.Follow; nil otherwise.
func (e *Engine) stale(tx *store.Tx) error {
	if e.follow == nil {
		return nil
	}
	d := tx.ActiveDigest()
	if b := e.policy.Active(); d == "" || (b != nil && b.Digest() == d) {
		return nil
	}
	return &staleBundle{digest: d}
}

// decideAndReserve decides step n afresh under the lock of its write
// transaction, logs the decision and acts on it: an allowed call is
// reserved (write-ahead), a denied one ends, one that needs an approval
// waits for it unless an approval already covers it.
func (e *Engine) decideAndReserve(ctx context.Context, tx *store.Tx, w store.Workflow, n int, f facts, v verdict) (reservation, error) {
	var r reservation
	var err error
	if r.step, err = tx.Step(w.ID, n); err != nil {
		return r, err
	}
	switch r.step.Status {
	case store.StepPending, store.StepHeld, store.StepWaitingApproval:
	default:
		return r, nil // another run got here first
	}
	if err := e.stale(tx); err != nil {
		return r, err
	}
	now := v.now
	if e.controls.CheckSwitchAtExecution && !tx.Switch(string(r.step.Tool)) {
		r.step.Status, r.step.Reason = store.StepHeld, held(r.step.Tool, "")
		r.step.Note = "tool switched off by an operator; resume after it is switched on"
		return r, e.putStep(tx, r.step)
	}
	lim, err := e.policy.Limits()
	if err != nil {
		return r, &undecided{fmt.Errorf("decide %s/%d: %w", w.ID, n, err)}
	}
	mode, err := e.modeFor(tx, w, r.step.Tool)
	if err != nil {
		return r, err
	}
	res, err := e.decide(ctx, tx, w, &r, f, lim, v, mode)
	if err != nil {
		return r, err
	}
	if mode == policy.ModeShadow {
		return e.shadow(tx, r, now)
	}
	if mode == policy.ModeApprovalOnly && res.Decision == policy.Allow {
		res.Decision, res.Rule = policy.RequireApproval, RuleApprovalOnly
		why := Explain(res, policy.Input{Tool: r.step.Tool}, lim)
		r.step.Decision, r.step.Rule, r.step.Reason = string(res.Decision), res.Rule, &why
	}
	switch res.Decision {
	case policy.Allow:
		return e.allow(tx, w, r, f, now)
	case policy.Deny:
		if r.tripped, err = e.countFailure(tx, w, r.step.Tool, "policy_denied "+res.Rule, now); err != nil {
			return r, err
		}
		return e.deny(tx, r, res.Rule, now)
	case policy.RequireApproval:
		return e.requireApproval(tx, w, r, f, lim, now)
	}
	return r, fmt.Errorf("decide %s/%d: decision %q: %w", w.ID, n, res.Decision, policy.ErrUnexpectedResult)
}

// decide takes the verdict made outside the writer if its facts still
// hold in tx, and otherwise asks the policy again here; it logs the
// decision, with the mode it is acted on under, applies the workflow's
// bounds to it and audits it. A policy that fails leaves the step
// unchanged (fail closed).
func (e *Engine) decide(ctx context.Context, tx *store.Tx, w store.Workflow, r *reservation, f facts, lim policy.Limits, v verdict, mode policy.Mode) (policy.Result, error) {
	s, now := r.step, v.now
	in := e.input(tx, w, s, f, lim, now)
	res := v.result
	if !v.holds(in, e.policy.Revision()) {
		var err error
		if res, err = e.policy.Decide(ctx, in); err != nil {
			return res, &undecided{fmt.Errorf("decide %s/%d: %w", s.Workflow, s.N, err)}
		}
	}
	doc, err := MarshalInput(in)
	if err != nil {
		return res, err
	}
	// The log keeps the policy's own answer, which a dry run replays; the
	// step is acted on with the line-item rule and within the workflow's
	// bounds, which the engine applies whatever the bundle says.
	logged := store.Decision{
		ID: ulid.Make().String(), At: now, Path: DecisionPath, Input: doc,
		Workflow: s.Workflow, N: s.N, User: w.User, Tool: s.Tool, Args: s.Args,
		Decision: string(res.Decision), Rule: res.Rule, Revision: res.Revision, Digest: e.digest(res.Revision),
		AgentVersion: w.AgentVersion, Mode: string(mode), Shadow: mode == policy.ModeShadow,
	}
	res = bounded(lineChecked(res, in), in)
	r.step.Decision, r.step.Rule, r.step.Reason = string(res.Decision), res.Rule, nil
	if res.Decision != policy.Allow {
		why := Explain(res, in, lim)
		r.step.Reason = &why
	}
	// The decision's audit record first, so that the log entry names it;
	// the record names the entry by its id, and the bundle by its digest
	// (a revision is only a name: two bundles have carried the same one).
	rec, err := e.appendAudit(tx, stepRecord(audit.KindDecision, w.User, r.step, map[string]any{
		"decision": string(res.Decision), "rule": res.Rule, "revision": res.Revision, "mode": string(mode),
		"digest": logged.Digest, "decision_id": logged.ID, "agent": e.agent, "agent_version": w.AgentVersion,
	}))
	if err != nil {
		return res, err
	}
	logged.Audit, logged.AuditPending = rec.ID, rec.Pending
	r.decided, err = tx.AppendDecision(logged)
	return res, err
}

// digest is the digest of the bundle that answered with revision. The
// decision read the active bundle once, and this reads it again: the digest
// is recorded only if that bundle still has the revision that answered, so
// a bundle activated in between under another revision leaves it empty
// rather than named for a decision it did not make.
func (e *Engine) digest(revision string) string {
	if b := e.policy.Active(); b != nil && b.Revision() == revision {
		return b.Digest()
	}
	return ""
}

// allow reserves an allowed call. A lead may have approved this call under
// an earlier bundle: the effect runs with that approval, so it is used, not
// left standing; one that cannot apply is voided.
func (e *Engine) allow(tx *store.Tx, w store.Workflow, r reservation, f facts, now time.Time) (reservation, error) {
	a, err := e.settleApproval(tx, w, r.step, now)
	if err != nil {
		return r, err
	}
	if a.ID != "" {
		r.changed = append(r.changed, a)
	}
	return e.reserve(tx, r, f, now)
}

// deny ends a denied call and voids any approval it had.
func (e *Engine) deny(tx *store.Tx, r reservation, rule string, now time.Time) (reservation, error) {
	r.step.Status, r.step.Finished = store.StepDenied, now
	r.step.Note = "denied by policy rule " + rule
	void, err := e.voidApproval(tx, r.step.Approval)
	if err != nil {
		return r, err
	}
	if void.ID != "" {
		r.changed = append(r.changed, void)
	}
	return r, e.putStep(tx, r.step)
}

// requireApproval reserves a call an approval covers, or has it wait for
// one (requested, renewed or replaced by approvalFor).
func (e *Engine) requireApproval(tx *store.Tx, w store.Workflow, r reservation, f facts, lim policy.Limits, now time.Time) (reservation, error) {
	ok, touched, err := e.approvalFor(tx, w, &r.step, f.order, lim, now)
	r.changed = append(r.changed, touched...)
	for _, a := range touched {
		if err := e.auditTx(tx, approvalRecord(audit.ActorEngine, a)); err != nil {
			return r, err
		}
	}
	if err != nil {
		return r, err
	}
	if !ok {
		return r, e.putStep(tx, r.step)
	}
	return e.reserve(tx, r, f, now)
}

// reserve writes ahead: the intent and the pre-state are durable before
// the effect, with the step's token deadline (fence.go), so the first
// dispatch needs no write of its own to bound its tokens.
func (e *Engine) reserve(tx *store.Tx, r reservation, f facts, now time.Time) (reservation, error) {
	r.step.Attempts, r.step.Reason = r.step.Attempts+1, nil
	e.setDeadline(&r.step, now)
	if e.controls.WriteAhead {
		r.step.Status, r.step.ReservedAt, r.step.Baseline = store.StepStarted, now, f.baseline
	}
	r.proceed = true
	if err := e.auditTx(tx, stepRecord(audit.KindDispatch, audit.ActorEngine, r.step, map[string]any{
		"idempotency_key": r.step.Key, "audience": tool.MustLookup(r.step.Tool).Audience, "attempt": r.step.Attempts,
		"agent": e.agent,
	})); err != nil {
		return r, err
	}
	return r, e.putStep(tx, r.step)
}

// hold parks step n as held with note, unless another run moved it on.
func (e *Engine) hold(wfID string, n int, note string, start time.Time) (store.Step, error) {
	s, err := batch(e.db, func(tx *store.Tx) (store.Step, error) { return e.holdTx(tx, wfID, n, note) })
	if err == nil {
		e.changes.changed(wfID)
		e.finished(s, start)
	}
	return s, err
}

// holdTx is hold inside tx.
func (e *Engine) holdTx(tx *store.Tx, wfID string, n int, note string) (store.Step, error) {
	s, err := tx.Step(wfID, n)
	if err != nil {
		return s, err
	}
	if s.Status != store.StepPending && s.Status != store.StepHeld && s.Status != store.StepWaitingApproval {
		return s, nil
	}
	s.Status, s.Note, s.Reason = store.StepHeld, note, held(s.Tool, note)
	if err := e.auditTx(tx, stepRecord(audit.KindResult, audit.ActorEngine, s, map[string]any{"status": string(s.Status), "note": note})); err != nil {
		return s, err
	}
	return s, e.putStep(tx, s)
}

// stillWaiting reports whether a waiting step's approval is still pending
// and unexpired, in which case running it would change nothing.
func (e *Engine) stillWaiting(s store.Step) bool {
	a, err := e.Approval(context.Background(), s.Approval)
	return err == nil && a.Status == store.ApprovalPending && e.clock.Now().Before(a.Expires) &&
		(!e.controls.BindApproval || a.CallHash == Binding(s.Workflow, s.Tool, s.Args))
}

// dispatch performs the effect of a reserved step and records the outcome.
// No token of it outlives the step's token deadline, which is extended
// durably first when this attempt needs a later one (fence.go). earlier
// is when the requests sent for the step before this attempt can no
// longer land (zero: none may), for outcome.
func (e *Engine) dispatch(ctx context.Context, w store.Workflow, s store.Step, earlier, start time.Time) (store.Step, error) {
	if err := e.fail("before_dispatch"); err != nil {
		return s, err
	}
	s, err := e.extendDeadline(s)
	if err != nil {
		return s, err
	}
	call := Call{Tool: s.Tool, Args: s.Args, Key: s.Key, Reference: shipmentReference(s), FreshKeyPerAttempt: !e.controls.IdempotencyKeys,
		NotAfter: s.TokenDeadline}
	result, err := e.systems.Execute(ctx, e.actor(w), call)
	if err == nil {
		if ferr := e.fail("after_dispatch"); ferr != nil {
			return s, ferr
		}
	}
	return e.record(s, result, err, earlier, start)
}

// record stores the outcome of a dispatch, in a group commit. A done step
// that recovery would find done again (recoverable) is answered before its
// record is durable: the record rides the next commit, the workflow's lock
// passes on and its readers read only once it is durable, and a crash
// before then leaves the step started, which resume resolves to done by
// the same key or reference without a second effect.
func (e *Engine) record(s store.Step, result json.RawMessage, derr error, earlier, start time.Time) (store.Step, error) {
	s = e.outcome(s, result, derr, e.clock.Now(), earlier)
	if derr == nil && e.recoverable(s) {
		e.recordLater(s)
	} else {
		var tripped *store.Breaker
		err := e.db.BatchRows(func(tx *store.Tx) (err error) { tripped, err = e.recordTx(tx, s); return err })
		if err != nil {
			return s, err
		}
		e.changes.changed(s.Workflow)
		e.tripped(tripped)
	}
	if s.Status == store.StepStarted || s.Status == store.StepUnknown {
		e.awaitUntil(s.Workflow, e.resolveAt(s)) // resolved after it, if nobody resumes it first
	}
	var refused *Refused
	var retErr error
	switch {
	case derr == nil:
	case errors.As(derr, &refused):
		e.obs.DispatchFailed(s.Tool, DispatchRefused)
	case errors.Is(derr, ErrOutcomeUnknown):
		e.obs.DispatchFailed(s.Tool, DispatchOutcomeUnknown)
	default:
		retErr = fmt.Errorf("dispatch %s/%d: %w: %v", s.Workflow, s.N, ErrUnavailable, derr)
		e.obs.DispatchFailed(s.Tool, DispatchTransient)
	}
	if err := e.fail("after_record"); err != nil {
		return s, err
	}
	e.finished(s, start)
	return s, retErr
}

// recoverable reports whether a step whose done record is lost would be
// resolved to done by resume alone, with no second effect: it was marked
// started before dispatch (write-ahead), and a refund is replayed under
// its idempotency key, a reshipment found by its reference, a lookup read
// again.
func (e *Engine) recoverable(s store.Step) bool {
	if !e.controls.WriteAhead {
		return false
	}
	switch s.Tool {
	case tool.IssueRefund:
		return e.controls.IdempotencyKeys
	case tool.ReshipOrder:
		return e.controls.ResolveByReference
	}
	return !tool.MustLookup(s.Tool).Effect
}

// recordLater queues s's record and keeps its workflow's lock until the
// record is durable. A record that fails to commit leaves the step started
// for resume to resolve.
func (e *Engine) recordLater(s store.Step) {
	durable := make(chan struct{})
	committed := e.db.EnqueueRows(func(tx *store.Tx) error {
		_, err := e.recordTx(tx, s) // a done step fails nothing: no breaker trips
		return err
	})
	e.locks.holdUntil(s.Workflow, durable)
	go func() {
		err := <-committed
		close(durable)
		switch {
		case errors.Is(err, ErrFenced):
			_ = e.fencedOff(s.Workflow, err) // the sidecar that took it over resolves it
			return
		case err != nil:
			e.log.Error("the record of a done step did not commit; resume resolves it", "workflow", s.Workflow, "step", s.N, "err", err)
			return
		}
		e.changes.changed(s.Workflow)
	}()
}

// outcome is s as the dispatch's outcome leaves it at now. earlier is
// when the requests sent before this attempt can no longer land (zero:
// none may): until then this attempt's refusal proves nothing about them.
//
// With the EffectFence control a 5xx or an unreachable system keeps the
// reservation (the step stays started): this attempt did nothing, but
// the answer says nothing of a request sent before it, and a gateway's
// 5xx not even of this one. Such a step, and one refused while an earlier
// request may still land, is marked ReleaseOnProof: once its effect is
// proven absent it is released and decided again (releaseOnProof), as the
// answer alone released it before. Without the control, and for a read
// (lookup_order), which has no effect to fence, the reservation is
// released at once, as the second wave did.
func (e *Engine) outcome(s store.Step, result json.RawMessage, derr error, now, earlier time.Time) store.Step {
	var refused *Refused
	if s.ReservedAt.IsZero() {
		s.ReservedAt = now // no write-ahead: the spend is known only now
	}
	system := tool.MustLookup(s.Tool).Audience
	s.ReleaseOnProof = false
	switch {
	case derr == nil:
		s.Status, s.Result, s.Finished = store.StepDone, result, now
	case errors.As(derr, &refused) && now.Before(earlier) && tool.MustLookup(s.Tool).Effect:
		s.Status, s.ReleaseOnProof = keptStatus(s.Status), true
		s.Note = fmt.Sprintf("refused by the %s: %s: %s; a request sent earlier may still land until %s, so the step keeps its reservation and is resolved after then",
			system, refused.Code, refused.Message, earlier.UTC().Format(time.RFC3339))
	case errors.As(derr, &refused):
		s.Status, s.Finished, s.Refusal = store.StepDenied, now, refused.Code
		s.Note = fmt.Sprintf("refused by the %s: %s: %s", system, refused.Code, refused.Message)
		s.Reason = refusedBy(system, refused)
	case errors.Is(derr, ErrOutcomeUnknown):
		s.Status = store.StepUnknown
		s.Note = "outcome unknown: resume resolves it by lookup, or a person reconciles it"
	case e.controls.EffectFence && tool.MustLookup(s.Tool).Effect:
		s.Status, s.ReleaseOnProof = keptStatus(s.Status), true
		s.Note = fmt.Sprintf("the %s did not take the call (%v); this attempt did nothing, but the step keeps its reservation "+
			"until its effect is proven absent (resolve_after %s); a resume after then releases it and decides the call again",
			system, derr, e.resolveAt(s).UTC().Format(time.RFC3339))
	default:
		// Nothing happened downstream: release the reservation.
		s.Status, s.ReservedAt, s.Baseline = store.StepPending, time.Time{}, nil
		s.Note = "system of record unavailable; resume to retry"
	}
	return s
}

// keptStatus is the status of a step that keeps its reservation after an
// attempt that did nothing: unknown stays unknown, anything else started.
func keptStatus(st store.StepStatus) store.StepStatus {
	if st == store.StepUnknown {
		return st
	}
	return store.StepStarted
}

// recordTx stores the outcome s and audits it. A refusal downstream or an
// unknown outcome, the first time the step enters it, counts against the
// breaker of the workflow's agent version; recordTx returns the breaker
// if that tripped it. It can run again.
//
// It runs as store.DB.UpdateRows allows (REPEATABLE READ on PostgreSQL):
// besides the step's own records, which only the lease holder writes, it
// adds to running sums (blind increments) and counts a failure on the
// tool's breaker, one row it reads and writes, which a concurrent writer
// of it conflicts with. It spends no headroom, so no cap rests on what it
// reads.
func (e *Engine) recordTx(tx *store.Tx, s store.Step) (*store.Breaker, error) {
	tx.Prefetch(store.ReadStep(s.Workflow, s.N), store.ReadWorkflow(s.Workflow), store.ReadCall(s.Workflow, s.Call),
		store.ReadSteps(s.Workflow), store.ReadNumbers(store.AuditNumbers, 1))
	detail := map[string]any{"status": string(s.Status)}
	if s.Note != "" {
		detail["note"] = s.Note
	}
	if len(s.Result) > 0 {
		detail["result"] = json.RawMessage(s.Result)
	}
	if err := e.auditTx(tx, stepRecord(audit.KindResult, audit.ActorEngine, s, detail)); err != nil {
		return nil, err
	}
	tripped, err := e.outcomeFailure(tx, s)
	if err != nil {
		return nil, err
	}
	return tripped, e.putStep(tx, s)
}

// outcomeFailure counts s against its breaker if it newly ended refused by
// a system of record or unknown.
func (e *Engine) outcomeFailure(tx *store.Tx, s store.Step) (*store.Breaker, error) {
	var what string
	switch {
	case s.Status == store.StepDenied && s.Refusal != "":
		what = "refused_downstream " + s.Refusal
	case s.Status == store.StepUnknown:
		what = "outcome_unknown"
	default:
		return nil, nil
	}
	if old, err := tx.Step(s.Workflow, s.N); err == nil && old.Status == s.Status {
		return nil, nil // recorded before: counted then
	}
	w, err := tx.Workflow(s.Workflow)
	if err != nil {
		return nil, err
	}
	return e.countFailure(tx, w, s.Tool, what, e.clock.Now())
}

// recover continues a step that a crash, a lost answer, an unavailable
// system or a takeover left started or unknown.
//
// A refund is dispatched again with the same key (the ledger replays):
// safe whenever, so it does not wait. Once no request of it can land any
// more it is looked up by key first: found, it happened, whatever a new
// attempt would be answered. A refusal of an attempt made while an
// earlier request may still land keeps the reservation (outcome).
//
// A reshipment is looked up by its reference: found, it happened. Not
// found, with the EffectFence control, proves nothing while a request of
// it may still land: it waits until its resolve time, and is sent again
// (a fresh token, the same reference) only after it (fence.go). Without
// the control, the second wave's rules: not found while started, the
// crash came before the request left, so it is sent; not found while
// unknown, it waits for a person.
func (e *Engine) recover(ctx context.Context, w store.Workflow, s store.Step, start time.Time) (store.Step, error) {
	earlier := e.stillLanding(s, e.clock.Now())
	if e.controls.EffectFence && s.ReleaseOnProof {
		return e.releaseOnProof(ctx, s, earlier, start)
	}
	spec := tool.MustLookup(s.Tool)
	if spec.Idempotent {
		settled := e.controls.EffectFence && earlier.IsZero()
		if s.Tool == tool.IssueRefund && (s.Status == store.StepUnknown || settled) {
			if entry, found, err := e.systems.RefundByKey(ctx, s.Key); err == nil && found {
				s.Note = "resolved by lookup: the ledger has the entry"
				return e.record(s, entry, nil, time.Time{}, start)
			}
		}
		return e.dispatch(ctx, w, s, earlier, start)
	}
	if !e.controls.ResolveByReference {
		return e.recoverByCount(ctx, w, s, start)
	}
	ref := shipmentReference(s)
	shipment, found, err := e.systems.ShipmentByReference(ctx, s.Args.Order, ref)
	switch {
	case err != nil:
		return s, fmt.Errorf("resolve %s/%d: %w: %v", s.Workflow, s.N, ErrUnavailable, err)
	case found:
		s.Note = "resolved by reference: the order system has the shipment " + ref
		return e.record(s, shipment, nil, time.Time{}, start)
	case e.controls.EffectFence:
		return e.resolveEffect(ctx, w, s, "no shipment of "+s.Args.Order+" carries reference "+ref, start)
	case s.Status == store.StepUnknown:
		return e.awaitReconciliation(s, ref)
	}
	return e.dispatchAgain(ctx, w, s, nil, "resolved by reference: no shipment carries "+ref+"; dispatching again", start)
}

// shipmentReference names a reshipment in the order system. It is derived
// from the step as the refund's idempotency key is, so it is the same on
// every retry and after every restart, and no other step's.
func shipmentReference(s store.Step) string {
	if s.Tool != tool.ReshipOrder {
		return ""
	}
	return "cs-" + Binding(s.Workflow, s.Tool, s.Args)[:40]
}

// awaitReconciliation leaves an unknown reshipment unknown, saying why and
// what a person should do.
func (e *Engine) awaitReconciliation(s store.Step, ref string) (store.Step, error) {
	note := fmt.Sprintf("outcome unknown: no shipment of %s carries reference %s yet, and the request that was sent may still land, "+
		"so it is not sent again; a person reconciles it (GET /orders/%s/shipments?reference=%s)", s.Args.Order, ref, s.Args.Order, ref)
	if s.Note == note {
		return s, nil
	}
	s.Note = note
	return s, e.db.Batch(func(tx *store.Tx) error { return e.putStep(tx, s) })
}

// dispatchAgain records one more attempt (and a new baseline, when given)
// and dispatches the step again.
func (e *Engine) dispatchAgain(ctx context.Context, w store.Workflow, s store.Step, baseline *int, note string, start time.Time) (store.Step, error) {
	if baseline != nil {
		s.Baseline = baseline
	}
	s.Attempts, s.Note = s.Attempts+1, note
	err := e.db.Batch(func(tx *store.Tx) error { return e.putStep(tx, s) })
	if err != nil {
		return s, err
	}
	return e.dispatch(ctx, w, s, time.Time{}, start)
}

// recoverByCount is the resolution without references: one more shipment
// of the order than the baseline means the reship happened. It cannot tell
// the step's shipment from another workflow's; it runs only when lookups
// by reference are switched off (Controls.ResolveByReference). No new
// shipment is taken as absent only as resolveEffect allows.
func (e *Engine) recoverByCount(ctx context.Context, w store.Workflow, s store.Step, start time.Time) (store.Step, error) {
	if s.Baseline == nil {
		if s.Status == store.StepUnknown {
			return s, nil // nothing to compare with: a person reconciles it
		}
		s.Status = store.StepUnknown
		return e.record(s, nil, ErrOutcomeUnknown, time.Time{}, start)
	}
	now, err := e.systems.Shipments(ctx, s.Args.Order)
	if err != nil {
		return s, fmt.Errorf("resolve %s/%d: %w: %v", s.Workflow, s.N, ErrUnavailable, err)
	}
	if now > *s.Baseline {
		s.Note = fmt.Sprintf("resolved by lookup: %d shipment(s) against a baseline of %d", now, *s.Baseline)
		result, _ := json.Marshal(map[string]any{"resolved_by": "lookup", "shipments": now})
		return e.record(s, result, nil, time.Time{}, start)
	}
	if e.controls.EffectFence && e.mayStillLand(s, e.clock.Now()) {
		return e.awaitResolve(s, fmt.Sprintf("%s has %d shipment(s), as before the call", s.Args.Order, now))
	}
	// Nothing happened: the call can be repeated safely, against a fresh baseline.
	return e.dispatchAgain(ctx, w, s, &now, "resolved by lookup: no shipment was made; dispatching again", start)
}

// putStep writes s, checking first that this sidecar still holds the
// workflow's lease under its fencing number (checkFence): every write of
// a step's state goes through here. A reason explains only a step denied,
// waiting for an approval or held: one the step has moved past is not
// stored.
func (e *Engine) putStep(tx *store.Tx, s store.Step) error {
	if err := e.checkFence(tx, s.Workflow); err != nil {
		return err
	}
	if !explains(s.Status) {
		s.Reason = nil
	}
	if err := tx.PutStep(s); err != nil {
		return err
	}
	return e.refreshWorkflow(tx, s.Workflow)
}

func (e *Engine) finished(s store.Step, start time.Time) {
	e.obs.StepFinished(s, time.Since(start))
}

// switchOn reads tool name's switch. A read that fails counts as off:
// on PostgreSQL a read can fail, and a switch that cannot be read must not
// let an effect through (resume goes on once it can be read).
func (e *Engine) switchOn(name tool.Name) bool {
	on := true
	err := e.db.View(func(tx *store.Tx) error { on = tx.Switch(string(name)); return nil })
	return on && err == nil
}

// totals are the spending facts a decision needs, read from the indexes.
func (e *Engine) totals(tx *store.Tx, w store.Workflow, s store.Step, lim policy.Limits, now time.Time) policy.Totals {
	t := policy.Totals{
		RepDay:    tx.RepSpentSince(w.User, now.Add(-lim.RepWindow)),
		AgentHour: tx.AgentSpentSince(now.Add(-time.Hour)),
	}
	if e.controls.Cumulative {
		t.OrderRefunded = tx.OrderSpent(s.Args.Order)
	}
	if e.controls.ReshipHistory {
		t.OrderReships = tx.OrderReships(s.Args.Order)
	}
	return t
}

// actor is the delegation an effect of workflow w runs under.
func (e *Engine) actor(w store.Workflow) Actor {
	a := Actor{Rep: w.User, Ceiling: w.Delegation.RefundCeiling}
	if !e.controls.DownstreamCeiling {
		a.Ceiling = 1 << 40 // no effective ceiling: the policy alone bounds the amount
	}
	return a
}

func delegation(w store.Workflow) *policy.User {
	d := w.Delegation
	if d.ID == "" {
		return nil
	}
	return &policy.User{ID: d.ID, Role: d.Role, Region: d.Region, Scopes: d.Scopes, RefundCeiling: d.RefundCeiling}
}

func isRefused(err error) bool {
	var r *Refused
	return errors.As(err, &r)
}
