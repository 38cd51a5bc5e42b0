package engine

import (
	"slices"
	"time"

	"github.com/countersign/countersign/executor/store"
)

// NoteDelegationExpired is the note of a step held because the delegation
// of its workflow expired: the rep's agent resumes it with a valid token.
const NoteDelegationExpired = "delegation_expired"

// RegionMismatch is the region a step's delegation takes when the
// presenting token names another region than the workflow's. It is not
// empty (an empty region would deny as an unknown user, R0) and no order
// has it, so the policy denies the call as outside the region (R2), which
// is what it is.
const RegionMismatch = "token-region-differs-from-workflow"

// narrowed is the delegation a step of a workflow with delegation d runs
// under when by drives it: the scopes both grant, the lower ceiling, and
// the workflow's region only if the token names the same one. by is nil
// when no token is presented (the start-up resume, an operator's resume):
// the stored delegation then stands, until it expires.
func (e *Engine) narrowed(d store.Delegation, by *Person) store.Delegation {
	if !e.controls.NarrowDelegation || by == nil || by.ID != d.ID {
		return d
	}
	out := d
	out.Scopes = nil
	for _, s := range d.Scopes {
		if slices.Contains(by.Scopes, s) {
			out.Scopes = append(out.Scopes, s)
		}
	}
	if out.Scopes == nil {
		out.Scopes = []string{} // no scope at all, which the policy reads as such (R1)
	}
	out.RefundCeiling = min(d.RefundCeiling, by.RefundCeiling)
	if by.Region != d.Region {
		out.Region = RegionMismatch
	}
	return out
}

// refreshed is w's delegation with its expiry moved to that of p's token,
// when p is the workflow's rep presenting a token, of the workflow's
// region, that expires later. Nothing else changes: a newer token extends
// how long the delegation lasts, never what it grants. ok is false when
// there is nothing to store.
func (e *Engine) refreshed(w store.Workflow, p Person) (store.Workflow, bool) {
	d := w.Delegation
	if !e.controls.NarrowDelegation || p.Role != RoleRep || p.ID != d.ID || p.Region != d.Region ||
		d.Expires.IsZero() || !p.Expires.After(d.Expires) {
		return w, false
	}
	w.Delegation.Expires = p.Expires
	return w, true
}

// refreshDelegation stores the refreshed delegation of w, if any, and
// returns the workflow as it now stands.
func (e *Engine) refreshDelegation(tx *store.Tx, w store.Workflow, p Person) (store.Workflow, error) {
	w, ok := e.refreshed(w, p)
	if !ok {
		return w, nil
	}
	return w, tx.PutWorkflow(w)
}

// expired reports whether delegation d can no longer start anything at
// now. A zero expiry is a workflow opened in process, by a caller that
// presented no token (the drill, the demo): it never expires.
func (e *Engine) expired(d store.Delegation, now time.Time) bool {
	return e.controls.NarrowDelegation && !d.Expires.IsZero() && !now.Before(d.Expires)
}
