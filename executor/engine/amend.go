package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

// Amend replaces the arguments of a step that has not started (pending,
// held or waiting for an approval) and decides the amended call at once,
// as Propose decides a new one, in one transaction with the amendment:
//
//   - an approval of the old call, pending or approved, is void in that
//     transaction (with the BindApproval control; without it an approval
//     is not bound to a call), so no lead is offered it once the
//     amendment is durable;
//   - a new call that needs an approval has its request made there too,
//     so the lead's queue shows the new call at once;
//   - a call the policy allows is reserved there and runs before Amend
//     answers; one it denies ends denied;
//   - a call the workflow already has ends suppressed, and voids the
//     approval whatever the control.
//
// When the facts cannot be read (an order system down) the amendment is
// still stored, pending, and Amend returns the error: resume decides it.
// An approval is still checked against the call it was given for when it
// is used (approvalFor).
func (e *Engine) Amend(ctx context.Context, p Person, wfID string, n int, raw json.RawMessage) (store.Step, error) {
	release, err := e.lock(ctx, wfID)
	if err != nil {
		return store.Step{}, err
	}
	defer release()
	args, claimed, err := e.amendedArgs(ctx, p, wfID, n, raw)
	if err != nil {
		return store.Step{}, err
	}
	s, err := e.amend(ctx, p, wfID, n, args, claimed)
	return s, e.fencedOff(wfID, err)
}

// amend is Amend under the workflow's lock, with the new arguments
// normalized.
func (e *Engine) amend(ctx context.Context, p Person, wfID string, n int, args tool.Args, claimed string) (store.Step, error) {
	start := time.Now()
	var am amendment
	err := e.db.View(func(tx *store.Tx) (err error) {
		am, err = e.amended(tx, p, wfID, n, args, claimed)
		return err
	})
	if err != nil {
		return store.Step{}, err
	}
	pl := e.planned(ctx, p, am.w, am.s, nil)
	r, err := e.decideBatch(ctx, lane(am.s.Tool, args), &pl.v, func(tx *store.Tx) (reservation, error) {
		if pl.ready {
			e.prefetch(tx, pl.w, store.Step{Workflow: wfID, N: n, Tool: am.s.Tool, Args: args, Call: tool.CallHash(am.s.Tool, args)}, pl.v.now,
				decisionNumbers(false)...)
		}
		return e.amendAndDecide(ctx, tx, p, wfID, n, args, claimed, pl)
	})
	if err != nil {
		return r.step, err
	}
	e.changes.changed(wfID)
	if pl.err == nil && r.failed == nil && !r.atAdmission && r.step.Status != store.StepPending {
		return e.reserved(ctx, pl.w, r, start)
	}
	e.approvalsChanged(r.changed...)
	switch {
	case pl.err != nil:
		return r.step, pl.err // amended; the facts could not be read: resume decides it
	case r.failed != nil:
		return r.step, r.failed // amended; the policy failed: resume decides it
	case r.step.Status == store.StepPending:
		return e.run(ctx, wfID, n, &p) // amended without a verdict: decide it the long way
	}
	return r.step, nil // suppressed
}

// amendment is how p's amendment leaves step n: the workflow, with the
// delegation p's token refreshes (refreshed: it changed), the step with
// the new call, pending a decision or suppressed, and void: the step's
// approval is of the old call, and is to be voided.
type amendment struct {
	w         store.Workflow
	refreshed bool
	s         store.Step
	void      bool
}

// amended works out, from tx, how p's amendment of step n of wfID to args
// leaves it; it writes nothing.
func (e *Engine) amended(tx *store.Tx, p Person, wfID string, n int, args tool.Args, claimed string) (amendment, error) {
	var am amendment
	w, err := e.ownWorkflow(tx, p, wfID)
	if err != nil {
		return am, err
	}
	am.w, am.refreshed = e.refreshed(w, p)
	s, err := tx.Step(wfID, n)
	if errors.Is(err, store.ErrNotFound) {
		return am, fmt.Errorf("step %s/%d: %w", wfID, n, ErrNotFound)
	} else if err != nil {
		return am, err
	}
	switch s.Status {
	case store.StepPending, store.StepHeld, store.StepWaitingApproval:
	default:
		return am, fmt.Errorf("step %s/%d is %s: %w", wfID, n, s.Status, ErrNotAmendable)
	}
	s.Args, s.ClaimedApprover = args, claimed
	s.Call, s.Key = tool.CallHash(s.Tool, args), idempotencyKey(wfID, s.Tool, args)
	s.Status, s.Note, s.Reason = store.StepPending, "arguments amended", nil
	if first, err := tx.StepByCall(wfID, s.Call); e.controls.RunDedupe && err == nil && first.N != n {
		// Amended into a call the workflow already has: it would share
		// that step's key and its ledger entry, so it ends here.
		s.Status, s.DuplicateOf = store.StepSuppressed, first.N
		s.Note = fmt.Sprintf("amended into the same call as step %d; nothing will be dispatched", first.N)
		am.void = s.Approval != ""
	} else if s.Approval != "" && e.controls.BindApproval {
		a, err := tx.Approval(s.Approval)
		if err != nil {
			return am, err
		}
		am.void = a.CallHash != Binding(wfID, s.Tool, args)
	}
	am.s = s
	return am, nil
}

// amendAndDecide stores the amendment, voids the approval of the old call
// and, when the plan is ready, decides and reserves the new call, all in
// tx. It is re-runnable: everything comes from tx and pl.
func (e *Engine) amendAndDecide(ctx context.Context, tx *store.Tx, p Person, wfID string, n int, args tool.Args, claimed string, pl proposal) (reservation, error) {
	var r reservation
	am, err := e.amended(tx, p, wfID, n, args, claimed)
	if err != nil {
		return r, err
	}
	if am.refreshed {
		if err := tx.PutWorkflow(am.w); err != nil {
			return r, err
		}
	}
	if am.void {
		a, err := tx.Approval(am.s.Approval)
		if err != nil {
			return r, err
		}
		if a, err = e.voided(tx, a); err != nil {
			return r, err
		}
		if a.ID != "" {
			r.changed = append(r.changed, a)
		}
	}
	r.step, r.atAdmission = am.s, am.s.Status == store.StepSuppressed
	if err := e.putStep(tx, am.s); err != nil || r.atAdmission || !pl.ready {
		return r, err
	}
	return e.decideAdmitted(ctx, tx, p, am.w, r, pl)
}

// amendedArgs normalizes and prices the new arguments of step n outside
// any write transaction (pricing reads the order system); Amend checks
// the step again under its own.
func (e *Engine) amendedArgs(ctx context.Context, p Person, wfID string, n int, raw json.RawMessage) (tool.Args, string, error) {
	var name tool.Name
	err := e.db.View(func(tx *store.Tx) error {
		if _, err := e.ownWorkflow(tx, p, wfID); err != nil {
			return err
		}
		s, err := tx.Step(wfID, n)
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("step %s/%d: %w", wfID, n, ErrNotFound)
		}
		name = s.Tool
		return err
	})
	if err != nil {
		return tool.Args{}, "", err
	}
	args, claimed, err := e.normalize(name, raw)
	if err == nil {
		args, err = e.price(ctx, p, name, args)
	}
	return args, claimed, err
}
