package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign/executor/audit"
	"github.com/countersign/countersign/executor/identity"
	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

// approvalFor settles a REQUIRE_APPROVAL decision inside the decide
// transaction. It consumes the step's approval when that is approved,
// unexpired and bound to exactly this call (ok true), and otherwise leaves
// the step waiting on a pending approval, requesting a new one when the old
// cannot be used (an amended call included, even one whose earlier version
// a lead rejected), or denied when a lead rejected exactly this call. It
// returns the approvals it changed.
func (e *Engine) approvalFor(tx *store.Tx, w store.Workflow, s *store.Step, order *policy.Order, lim policy.Limits, now time.Time) (ok bool, changed []store.Approval, err error) {
	if !e.controls.StrictSchema && s.ClaimedApprover != "" {
		s.Note = "approval taken from the arguments: approved_by " + s.ClaimedApprover
		return true, nil, nil
	}
	binding := Binding(w.ID, s.Tool, s.Args)
	replaces := s.Approval
	if s.Approval != "" {
		a, err := tx.Approval(s.Approval)
		if err != nil {
			return false, nil, err
		}
		bound := !e.controls.BindApproval || a.CallHash == binding
		expired := !now.Before(a.Expires)
		switch {
		case a.Status == store.ApprovalApproved && !expired && bound:
			a.Status = store.ApprovalUsed
			s.Note = "approved by " + a.Approver
			return true, []store.Approval{a}, tx.PutApproval(a)
		case a.Status == store.ApprovalPending && !expired && bound:
			s.Status = store.StepWaitingApproval
			return false, nil, nil
		case a.Status == store.ApprovalRejected && bound:
			s.Status, s.Finished, s.Reason = store.StepDenied, now, rejected(a)
			s.Note = "approval rejected by " + a.Approver
			return false, nil, nil
		case a.Status == store.ApprovalRejected:
			// The lead rejected another call: the amended one is a new call
			// and gets its own request. The rejection stays on record.
			s.Note = "approval " + a.ID + " was rejected for a different call; a new approval was requested"
		case a.Status == store.ApprovalPending || a.Status == store.ApprovalApproved:
			if expired {
				a.Status = store.ApprovalExpired
				s.Note = "approval " + a.ID + " expired; a new approval was requested"
			} else {
				a.Status = store.ApprovalVoid
				s.Note = "approval " + a.ID + " was for a different call; a new approval was requested"
			}
			a.Decided = now
			if err := tx.PutApproval(a); err != nil {
				return false, nil, err
			}
			changed = append(changed, a)
		}
	}
	id, err := tx.NewApprovalID()
	if err != nil {
		return false, nil, err
	}
	a := store.Approval{
		ID: id, Workflow: w.ID, N: s.N, Tool: s.Tool, Args: s.Args, CallHash: binding,
		Summary:   Summary(w, s.Tool, s.Args, order),
		Requester: w.User, RequesterRegion: w.Delegation.Region,
		Rule: s.Rule, Ticket: w.Ticket, Replaces: replaces, AgentReason: s.AgentReason,
		Status: store.ApprovalPending, Created: now, Expires: now.Add(lim.ApprovalTTL),
	}
	if order != nil {
		a.Customer, a.OrderPaid = order.Customer, order.Paid
	}
	if err := tx.PutApproval(a); err != nil {
		return false, nil, err
	}
	s.Approval, s.Status = id, store.StepWaitingApproval
	return false, append(changed, a), nil
}

// Summary is what the approver reads. It is built from the normalized
// arguments and the order record, never from text the model wrote.
func Summary(w store.Workflow, name tool.Name, a tool.Args, order *policy.Order) string {
	customer, paid := "an unknown customer", money.Cents(0)
	if order != nil {
		customer, paid = order.Customer, order.Paid
	}
	switch name {
	case tool.IssueRefund:
		return fmt.Sprintf("Refund %s on order %s for %s; requested by %s; workflow %s", a.Amount, a.Order, customer, w.User, w.ID)
	case tool.ReshipOrder:
		return fmt.Sprintf("Reship order %s (paid %s) for %s; requested by %s; workflow %s", a.Order, paid, customer, w.User, w.ID)
	default:
		return fmt.Sprintf("%s on order %s; requested by %s; workflow %s", name, a.Order, w.User, w.ID)
	}
}

// Approvals lists approvals, all of them when status is empty.
func (e *Engine) Approvals(ctx context.Context, status store.ApprovalStatus) ([]store.Approval, error) {
	var out []store.Approval
	err := e.db.View(func(tx *store.Tx) (err error) {
		out, err = tx.Approvals(func(a store.Approval) bool { return status == "" || a.Status == status })
		return err
	})
	return out, err
}

// Approve records lead p's approval of approval id, if the approval floor
// (floor: a lead, not the requester) and then the approver rules of the
// active bundle allow it. It executes nothing: the step runs at its
// workflow's next resume.
func (e *Engine) Approve(ctx context.Context, p Person, id, comment string) (store.Approval, error) {
	return e.decideApproval(ctx, p, id, comment, store.ApprovalApproved)
}

// Reject records lead p's rejection. The same rules apply, except that a
// lead may reject an amount above their own limit.
func (e *Engine) Reject(ctx context.Context, p Person, id, comment string) (store.Approval, error) {
	return e.decideApproval(ctx, p, id, comment, store.ApprovalRejected)
}

func (e *Engine) decideApproval(ctx context.Context, p Person, id, comment string, to store.ApprovalStatus) (store.Approval, error) {
	if err := checkComment(comment); err != nil {
		return store.Approval{}, err
	}
	var a store.Approval
	var refused policy.Refusal
	err := e.underActiveBundle(ctx, func() (err error) {
		a, refused, err = e.recordApprovalDecision(ctx, p, id, comment, to)
		return err
	})
	if err != nil {
		return a, err
	}
	if refused == "" || refused == policy.ApprovalExpired {
		e.changes.changed(a.Workflow)
		e.approvalsChanged(a)
	}
	if refused != "" {
		return a, &ApprovalRefused{Code: string(refused)}
	}
	return a, nil
}

// recordApprovalDecision moves pending approval id to status to for p, or
// records p's refused attempt, in one transaction under the fleet's active
// bundle (e.stale). The approval floor comes first, before the approval's
// status and before the approver rules: a person whose role may never
// decide is refused whether or not the approval exists or is still
// pending, so the refusal tells a rep nothing about another rep's calls.
func (e *Engine) recordApprovalDecision(ctx context.Context, p Person, id, comment string, to store.ApprovalStatus) (a store.Approval, refused policy.Refusal, err error) {
	err = e.db.Update(func(tx *store.Tx) error {
		a, refused = store.Approval{}, "" // this may run more than once
		if err := e.stale(tx); err != nil {
			return err
		}
		var err error
		a, err = tx.Approval(id)
		missing := errors.Is(err, store.ErrNotFound)
		if err != nil && !missing {
			return err
		}
		if refused = e.floor(p, a.Requester); refused != "" {
			if missing {
				return nil // nothing to record an attempt on
			}
			return e.auditRefusal(tx, p, a, refused)
		}
		if missing {
			return notFound("approval", id)
		}
		if a.Status != store.ApprovalPending {
			return fmt.Errorf("approval %s is %s: %w", id, a.Status, ErrNotPending)
		}
		now := e.clock.Now()
		if refused, err = e.refusal(ctx, p, a, to, now); err != nil {
			return err
		}
		switch refused {
		case "":
			a.Status, a.Approver, a.Comment, a.Decided = to, p.ID, comment, now
		case policy.ApprovalExpired:
			a.Status, a.Decided = store.ApprovalExpired, now
		default:
			return e.auditRefusal(tx, p, a, refused)
		}
		if err := e.auditTx(tx, approvalRecord(p.ID, a)); err != nil {
			return err
		}
		return tx.PutApproval(a)
	})
	return a, refused, err
}

// auditRefusal records p's refused attempt on a: nothing changes on a
// refusal, but the attempt is on record, under the sub as p presented it.
func (e *Engine) auditRefusal(tx *store.Tx, p Person, a store.Approval, refused policy.Refusal) error {
	r := approvalRecord(p.ID, a)
	r.Detail["refused"] = string(refused)
	return e.auditTx(tx, r)
}

// ForbiddenRole is the approval floor's refusal of a person whose role is
// not lead (the API's 403 forbidden_role). The floor's other refusal is
// policy.RequesterCannotApprove, the code the approver rules use too.
const ForbiddenRole policy.Refusal = "forbidden_role"

// floor is the approval floor, the same for every front (the API, the
// lead's page, the lead's MCP tools) and for compensation: whatever the
// active bundle's approver rules say, the requester never decides their
// own call, and only a lead decides. The approver rules run after it and
// can only narrow it; no bundle widens it. The requester is checked
// first, so a rep who tries to approve her own call is told it is hers
// (the seed's table); requester is "" when there is no record to compare
// with, and then the role alone decides.
//
// The requester is compared as a person (identity.Same): a token whose
// sub is another spelling of the requester's (Rep-Ana for rep-ana) is
// the requester.
func (e *Engine) floor(p Person, requester string) policy.Refusal {
	switch {
	case !e.controls.ApprovalRoleFloor:
		return ""
	case requester != "" && identity.Same(p.ID, requester):
		return policy.RequesterCannotApprove
	case p.Role != RoleLead:
		return ForbiddenRole
	}
	return ""
}

// refusal is what the approver rules of the active bundle (the fleet's:
// the caller checked e.stale in its transaction) answer to p
// moving pending approval a to status to: empty when they allow it. A lead
// may reject an amount above their own limit. The caller applies the
// floor first.
func (e *Engine) refusal(ctx context.Context, p Person, a store.Approval, to store.ApprovalStatus, now time.Time) (policy.Refusal, error) {
	refused, err := e.policy.CheckApprover(ctx, approverInput(p, a.Requester, a.RequesterRegion, a.Tool, a.Args.Amount, a.Expires, now))
	if err != nil {
		return "", fmt.Errorf("approver rules: %w", err)
	}
	if to == store.ApprovalRejected && refused == policy.AboveApproverLimit {
		refused = ""
	}
	return refused, nil
}

// approverInput is what the approver rules see of p deciding a call that
// requester (of region) made. Both ids are in their canonical form
// (identity.Canonical), so that a rule comparing the approver with the
// requester, or naming a person, compares people and not spellings: a
// bundle's "input.approver.id != input.requester.id" is not fooled by
// Rep-Ana. The audit and the approval record keep the sub as presented.
func approverInput(p Person, requester, region string, name tool.Name, amount money.Cents, expires, now time.Time) policy.ApproverInput {
	return policy.ApproverInput{
		Approver:  policy.Approver{ID: canonical(p.ID), Role: p.Role, Region: p.Region, ApproveLimit: p.ApproveLimit},
		Requester: policy.Requester{ID: canonical(requester), Region: region},
		Tool:      name, Amount: amount, Expires: expires, Now: now,
	}
}

// canonical is id's canonical form, or id itself where it has none (an id
// that reached a record other than through authentication, which refuses
// such a sub): it is then compared as it is.
func canonical(id string) string {
	if c, err := identity.Canonical(id); err == nil {
		return c
	}
	return id
}

// voidApproval voids an approval that can no longer be used, if it is
// still pending or approved, and returns it; it returns no approval (an
// empty ID) when there was none to void.
func (e *Engine) voidApproval(tx *store.Tx, id string) (store.Approval, error) {
	if id == "" {
		return store.Approval{}, nil
	}
	a, err := tx.Approval(id)
	if err != nil {
		return store.Approval{}, err
	}
	return e.voided(tx, a)
}

// voided voids a if it is still pending or approved and returns it as
// voided; it returns the zero Approval when a was neither.
func (e *Engine) voided(tx *store.Tx, a store.Approval) (store.Approval, error) {
	if a.Status != store.ApprovalPending && a.Status != store.ApprovalApproved {
		return store.Approval{}, nil
	}
	a.Status, a.Decided = store.ApprovalVoid, e.clock.Now()
	if err := e.auditTx(tx, approvalRecord(audit.ActorEngine, a)); err != nil {
		return store.Approval{}, err
	}
	return a, tx.PutApproval(a)
}

// settleApproval closes the step's approval when policy now allows the call
// outright: an approval given for exactly this call, still valid, is used by
// this execution; any other one is voided. It returns the approval it
// changed, if any.
func (e *Engine) settleApproval(tx *store.Tx, w store.Workflow, s store.Step, now time.Time) (store.Approval, error) {
	if s.Approval == "" {
		return store.Approval{}, nil
	}
	a, err := tx.Approval(s.Approval)
	if err != nil {
		return store.Approval{}, err
	}
	switch {
	case a.Status == store.ApprovalApproved && now.Before(a.Expires) && a.CallHash == Binding(w.ID, s.Tool, s.Args):
		a.Status = store.ApprovalUsed
	case a.Status == store.ApprovalPending || a.Status == store.ApprovalApproved:
		a.Status, a.Decided = store.ApprovalVoid, now
	default:
		return store.Approval{}, nil
	}
	if err := e.auditTx(tx, approvalRecord(audit.ActorEngine, a)); err != nil {
		return store.Approval{}, err
	}
	return a, tx.PutApproval(a)
}
