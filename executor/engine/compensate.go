package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign/executor/audit"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

// ErrNotCompensable: the step is not an executed refund, or was already
// ratified or reversed.
var ErrNotCompensable = errors.New("step cannot be ratified or reversed")

// Ratify accepts an executed refund after the fact: lead p records a
// retroactive approval, marked as such, under the same approver rules as
// any approval (not the requester, a lead, same region, within their
// limit). The money stays where it is.
func (e *Engine) Ratify(ctx context.Context, p Person, wfID string, n int, comment string) (store.Approval, error) {
	if err := checkComment(comment); err != nil {
		return store.Approval{}, err
	}
	release, err := e.lock(ctx, wfID)
	if err != nil {
		return store.Approval{}, err
	}
	defer release()
	var a store.Approval
	err = e.underActiveBundle(ctx, func() error {
		return e.db.Update(func(tx *store.Tx) error {
			a = store.Approval{} // this may run more than once
			w, s, err := e.compensable(tx, wfID, n)
			if err != nil {
				return err
			}
			now := e.clock.Now()
			if err := e.checkCompensator(ctx, tx, p, w, s); err != nil {
				return err
			}
			id, err := tx.NewApprovalID()
			if err != nil {
				return err
			}
			a = store.Approval{
				ID: id, Workflow: wfID, N: n, Tool: s.Tool, Args: s.Args, CallHash: Binding(wfID, s.Tool, s.Args),
				Summary: Summary(w, s.Tool, s.Args, nil) + " (ratified after execution)", Requester: w.User,
				RequesterRegion: w.Delegation.Region, Approver: p.ID, Status: store.ApprovalUsed, Comment: comment,
				Retroactive: true, Created: now, Expires: now, Decided: now,
			}
			if err := tx.PutApproval(a); err != nil {
				return err
			}
			if err := e.auditTx(tx, stepRecord(audit.KindCompensation, p.ID, s, map[string]any{
				"action": "ratify", "approval": id, "comment": comment,
			})); err != nil {
				return err
			}
			s.Approval, s.Note = id, "ratified by "+p.ID+" after execution (retroactive approval "+id+")"
			return e.putStep(tx, s)
		})
	})
	if err == nil {
		e.changes.changed(wfID)
		e.approvalsChanged(a)
	}
	return a, err
}

// Reverse compensates an executed refund: lead p, under the approver rules,
// has the ledger post a reversal entry pointing at the refund's entry. The
// step becomes compensated and stops counting as spent. A reversal records
// an intention; recovering the money is outside the system.
func (e *Engine) Reverse(ctx context.Context, p Person, wfID string, n int, comment string) (store.Step, error) {
	if err := checkComment(comment); err != nil {
		return store.Step{}, err
	}
	release, err := e.lock(ctx, wfID)
	if err != nil {
		return store.Step{}, err
	}
	defer release()
	var w store.Workflow
	var s store.Step
	err = e.underActiveBundle(ctx, func() error {
		return e.db.View(func(tx *store.Tx) (err error) {
			if w, s, err = e.compensable(tx, wfID, n); err != nil {
				return err
			}
			return e.checkCompensator(ctx, tx, p, w, s)
		})
	})
	if err != nil {
		return s, err
	}
	var entry struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(s.Result, &entry); err != nil || entry.ID == "" {
		return s, fmt.Errorf("reverse %s/%d: the step's result names no ledger entry: %w", wfID, n, ErrNotCompensable)
	}
	result, err := e.systems.Reverse(ctx, Actor{Rep: p.ID}, entry.ID, "rev-"+s.Key)
	if err != nil {
		e.obs.DispatchFailed(tool.IssueRefund, DispatchReversal)
		return s, fmt.Errorf("reverse %s/%d: %w", wfID, n, err)
	}
	err = e.db.Update(func(tx *store.Tx) error {
		if s, err = tx.Step(wfID, n); err != nil {
			return err
		}
		if err := e.auditTx(tx, stepRecord(audit.KindCompensation, p.ID, s, map[string]any{
			"action": "reverse", "reversal": json.RawMessage(result), "comment": comment,
		})); err != nil {
			return err
		}
		s.Status = store.StepCompensated
		s.Note = fmt.Sprintf("reversed in the ledger by %s: %s", p.ID, result)
		if comment != "" {
			s.Note += "; " + comment
		}
		return e.putStep(tx, s)
	})
	if err == nil {
		e.changes.changed(wfID)
	}
	return s, err
}

// compensable loads an executed refund that has not been ratified or reversed.
func (e *Engine) compensable(tx *store.Tx, wfID string, n int) (store.Workflow, store.Step, error) {
	w, err := tx.Workflow(wfID)
	if err != nil {
		return w, store.Step{}, fmt.Errorf("workflow %q: %w", wfID, ErrNotFound)
	}
	s, err := tx.Step(wfID, n)
	if err != nil {
		return w, s, fmt.Errorf("step %s/%d: %w", wfID, n, ErrNotFound)
	}
	if s.Tool != tool.IssueRefund || s.Status != store.StepDone {
		return w, s, fmt.Errorf("step %s/%d is a %s step, %s: %w", wfID, n, s.Tool, s.Status, ErrNotCompensable)
	}
	if s.Approval != "" {
		if a, err := tx.Approval(s.Approval); err == nil && a.Retroactive {
			return w, s, fmt.Errorf("step %s/%d was already ratified: %w", wfID, n, ErrNotCompensable)
		}
	}
	return w, s, nil
}

// checkCompensator applies the approval floor and then the approver rules
// of the fleet's active bundle to the lead who compensates, in tx: a
// ratification is an approval, given late.
func (e *Engine) checkCompensator(ctx context.Context, tx *store.Tx, p Person, w store.Workflow, s store.Step) error {
	if err := e.stale(tx); err != nil {
		return err
	}
	if refused := e.floor(p, w.User); refused != "" {
		return &ApprovalRefused{Code: string(refused)}
	}
	now := e.clock.Now()
	// A compensation decision does not expire.
	refused, err := e.policy.CheckApprover(ctx, approverInput(p, w.User, w.Delegation.Region, s.Tool, s.Args.Amount, now.Add(time.Minute), now))
	if err != nil {
		return fmt.Errorf("approver rules: %w", err)
	}
	if refused != "" {
		return &ApprovalRefused{Code: string(refused)}
	}
	return nil
}
