package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/countersign/countersign/executor/identity"
	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/store"
)

// CodeNotPending is ApprovalItem.Code for an approval that is no longer
// pending: no one can approve it.
const CodeNotPending = "not_pending"

// ApprovalQuery selects approvals for ApprovalQueue.
type ApprovalQuery struct {
	// Status keeps only approvals with it; empty keeps all.
	Status store.ApprovalStatus
	// Approver keeps only the approvals that person decided: approved or
	// rejected, whatever became of them since (used, void, expired).
	// Requester keeps only those the rep's calls asked for. Both compare
	// ids as every same-person check does (identity.Same); empty keeps
	// all.
	Approver, Requester string
	// All keeps pending approvals the person may not approve too. An
	// operator, who approves nothing, always sees all.
	All bool
	// Facts also reads what a lead's card shows beyond the approval
	// itself: the decision that asked (ApprovalItem.Asked) and the
	// refunds already on the order (ApprovalItem.OrderRefunds). It costs
	// two index reads per item, so only the page asks for it.
	Facts bool
}

// keeps reports whether q selects a, before anyone judges it.
func (q ApprovalQuery) keeps(a store.Approval) bool {
	switch {
	case q.Status != "" && a.Status != q.Status:
		return false
	case q.Approver != "" && (a.Approver == "" || !identity.Same(a.Approver, q.Approver)):
		return false
	case q.Requester != "" && !identity.Same(a.Requester, q.Requester):
		return false
	}
	return true
}

// ApprovalItem is an approval as a lead reviews it: the call, what the
// order has seen, what it replaces, and whether this lead may approve it.
type ApprovalItem struct {
	store.Approval
	// Refunded is what countersign has refunded on the order so far.
	Refunded money.Cents
	// Previous is the approval this one replaces, with the earlier call
	// in its Args; nil when it replaces none.
	Previous *store.Approval
	// CanApprove tells whether the person may approve it now, by the
	// approval floor and the approver rules of the active bundle; when
	// false, Code says why, in the codes of the approve endpoint
	// (ForbiddenRole among them) or CodeNotPending.
	CanApprove bool
	Code       string
	// Asked and OrderRefunds are read only for ApprovalQuery.Facts.
	// Asked is the decision that asked for the approval, as the decision
	// log keeps it; nil when the log holds none for it. OrderRefunds are
	// the refunds on the order that count as spent now, in any workflow.
	Asked        *Asking
	OrderRefunds []store.OrderRefund
}

// Asking is the decision that asked for an approval: the bundle that
// answered, and the totals the policy was given, read back from the
// decision log's copy of its input rather than looked up again.
type Asking struct {
	At       time.Time
	Rule     string
	Revision string
	Digest   string // empty when the log did not record it
	// Totals are the input's totals: what had been refunded on the order
	// and what the rep had refunded in the rolling day when it asked.
	// Known is false for a decision recorded without its input.
	Known         bool
	OrderRefunded money.Cents
	RepDay        money.Cents
}

// ApprovalQueue lists the approvals q selects as person p sees them. Unless
// q.All, pending approvals p may not approve are left out, so a lead's
// default view is what they can act on.
func (e *Engine) ApprovalQueue(ctx context.Context, p Person, q ApprovalQuery) ([]ApprovalItem, error) {
	if e.follow != nil { // can_approve is what the fleet's active bundle answers
		if err := e.follow(ctx); err != nil {
			return nil, fmt.Errorf("follow the fleet's active bundle: %w", err)
		}
	}
	var items []ApprovalItem
	err := e.db.View(func(tx *store.Tx) error {
		items = items[:0]
		list, err := tx.Approvals(q.keeps)
		if err != nil {
			return err
		}
		for _, a := range list {
			it, err := itemOf(tx, a)
			if err == nil && q.Facts {
				err = readFacts(tx, &it)
			}
			if err != nil {
				return err
			}
			items = append(items, it)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	all := q.All || p.Role == RoleOperator
	out := items[:0]
	for _, it := range items {
		if err := e.judge(ctx, p, &it); err != nil {
			return nil, err
		}
		if all || it.CanApprove || it.Status != store.ApprovalPending {
			out = append(out, it)
		}
	}
	return out, nil
}

// ApprovalDetail is approval id as person p sees it. A rep sees only the
// approvals of her own calls: another rep's is, to her, exactly as absent
// as an id nobody used (see readableWorkflow).
func (e *Engine) ApprovalDetail(ctx context.Context, p Person, id string) (ApprovalItem, error) {
	var it ApprovalItem
	err := e.db.View(func(tx *store.Tx) error {
		a, err := tx.Approval(id)
		if err == nil && p.Role == RoleRep && a.Requester != p.ID {
			err = store.ErrNotFound
		}
		if errors.Is(err, store.ErrNotFound) {
			return notFound("approval", id)
		} else if err != nil {
			return err
		}
		it, err = itemOf(tx, a)
		return err
	})
	if err != nil {
		return it, err
	}
	return it, e.judge(ctx, p, &it)
}

func itemOf(tx *store.Tx, a store.Approval) (ApprovalItem, error) {
	it := ApprovalItem{Approval: a, Refunded: tx.OrderSpent(a.Args.Order)}
	if a.Replaces != "" {
		prev, err := tx.Approval(a.Replaces)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return it, err
		}
		if err == nil {
			it.Previous = &prev
		}
	}
	return it, nil
}

// readFacts reads what a lead's card shows beyond the approval: the
// decision that asked (the last one of the step at or before the
// approval's creation, which the same transaction wrote) and the refunds
// on the order. Two index reads: the workflow's decisions and the
// order's refunds.
func readFacts(tx *store.Tx, it *ApprovalItem) error {
	ds, err := tx.Decisions(it.Workflow)
	if err != nil {
		return err
	}
	for _, d := range slices.Backward(ds) {
		if d.N == it.N && !d.At.After(it.Created) {
			it.Asked = asking(d)
			break
		}
	}
	if it.Args.Order != "" {
		if it.OrderRefunds, err = tx.OrderRefunds(it.Args.Order); err != nil {
			return err
		}
	}
	return nil
}

// asking reads d's totals back from its recorded input: the shape the
// policy is given (policy.InputJSON). A record without input, or one
// whose input does not read, still names the bundle.
func asking(d store.Decision) *Asking {
	a := &Asking{At: d.At, Rule: d.Rule, Revision: d.Revision, Digest: d.Digest}
	var in struct {
		Totals *struct {
			OrderRefunded money.Cents `json:"order_refunded"`
			RepDay        money.Cents `json:"rep_day"`
		} `json:"totals"`
	}
	if len(d.Input) > 0 && json.Unmarshal(d.Input, &in) == nil && in.Totals != nil {
		a.Known, a.OrderRefunded, a.RepDay = true, in.Totals.OrderRefunded, in.Totals.RepDay
	}
	return a
}

// judge sets whether p may approve the item now: the approval floor, then
// the approver rules, as Approve would answer.
func (e *Engine) judge(ctx context.Context, p Person, it *ApprovalItem) error {
	if it.Status != store.ApprovalPending {
		it.CanApprove, it.Code = false, CodeNotPending
		return nil
	}
	refused := e.floor(p, it.Requester)
	if refused == "" {
		var err error
		if refused, err = e.refusal(ctx, p, it.Approval, store.ApprovalApproved, e.clock.Now()); err != nil {
			return err
		}
	}
	it.CanApprove, it.Code = refused == "", string(refused)
	return nil
}
