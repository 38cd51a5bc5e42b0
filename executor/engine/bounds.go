package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign/executor/audit"
	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

// The rules of the bounds of a run. The call policy may name them itself;
// the engine applies them after the policy in any case (see bounded), so a
// bundle without them still bounds every workflow.
const (
	RuleStepLimit    = "B1-workflow-step-limit"
	RuleSpendLimit   = "B2-workflow-spend-limit"
	RuleDeadline     = "B3-workflow-deadline"
	RuleAttemptLimit = "B4-attempt-limit"
)

// Bounds are what an agent asks for when it opens a workflow: each member
// set may only narrow the active bundle's bound; a nil one keeps it.
type Bounds struct {
	MaxSteps *int
	MaxSpend *money.Cents
	Deadline *time.Time
}

// narrow is the bundle's bounds b for a workflow opened at now, narrowed
// by asked. A member that is not above zero, or wider than the bundle's,
// is an *InvalidError that names the field and the bundle's bound.
func narrow(b policy.Bounds, asked Bounds, now time.Time) (store.Bounds, error) {
	out := store.Bounds{MaxSteps: b.MaxSteps, MaxSpend: b.MaxSpend, Deadline: now.Add(b.Deadline), MaxAttempts: b.MaxAttempts}
	if n := asked.MaxSteps; n != nil {
		if *n < 1 || *n > b.MaxSteps {
			return out, &InvalidError{"bounds.max_steps", fmt.Sprintf("must be from 1 to the bundle's bound of %d steps, got %d", b.MaxSteps, *n)}
		}
		out.MaxSteps = *n
	}
	if c := asked.MaxSpend; c != nil {
		if *c < 1 || *c > b.MaxSpend {
			return out, &InvalidError{"bounds.max_spend", fmt.Sprintf("must be from 1 to the bundle's bound of %d cents, got %d", b.MaxSpend, *c)}
		}
		out.MaxSpend = *c
	}
	if d := asked.Deadline; d != nil {
		if !d.After(now) || d.After(out.Deadline) {
			return out, &InvalidError{"bounds.deadline", fmt.Sprintf("must be after now (%s) and no later than the bundle's bound of %v from now (%s), got %s",
				now.Format(time.RFC3339), b.Deadline, out.Deadline.Format(time.RFC3339), d.Format(time.RFC3339))}
		}
		out.Deadline = *d
	}
	return out, nil
}

// boundsFor are the bounds of a workflow opened at now asking for asked.
// With no bundle active a workflow may still open, asking for nothing: it
// stores no bounds and runs under those of the bundle active when it acts
// (boundsOf); one that asks to narrow them is refused until a bundle is.
func (e *Engine) boundsFor(asked Bounds, now time.Time) (store.Bounds, error) {
	a, err := e.policy.Autonomy()
	switch {
	case err != nil && asked == (Bounds{}):
		return store.Bounds{}, nil
	case err != nil:
		return store.Bounds{}, fmt.Errorf("create workflow: narrow its bounds: %w", err)
	}
	return narrow(a.Bounds, asked, now)
}

// sameAsked reports whether asked, against a workflow's stored bounds b,
// asks for nothing b does not already have: opening the workflow again
// with it is the same request.
func sameAsked(b store.Bounds, asked Bounds) bool {
	return (asked.MaxSteps == nil || *asked.MaxSteps == b.MaxSteps) &&
		(asked.MaxSpend == nil || *asked.MaxSpend == b.MaxSpend) &&
		(asked.Deadline == nil || asked.Deadline.Equal(b.Deadline))
}

// boundsOf are w's bounds. A workflow stored before workflows had bounds
// has the active bundle's, counted from its creation.
func (e *Engine) boundsOf(w store.Workflow, lim policy.Limits) store.Bounds {
	if w.Bounds != (store.Bounds{}) {
		return w.Bounds
	}
	b := policy.DefaultBounds
	b.MaxSpend = lim.RepDaily
	if a, err := e.policy.Autonomy(); err == nil {
		b = a.Bounds
	}
	return store.Bounds{MaxSteps: b.MaxSteps, MaxSpend: b.MaxSpend, Deadline: w.Created.Add(b.Deadline), MaxAttempts: b.MaxAttempts}
}

// pastDeadline reports whether w's deadline has passed at now: the
// deadline itself is the last moment w may act.
func pastDeadline(b store.Bounds, now time.Time) bool { return now.After(b.Deadline) }

// runOf is where step s stands against w's bounds, as tx sees them at now.
func (e *Engine) runOf(tx *store.Tx, w store.Workflow, s store.Step, lim policy.Limits, now time.Time) *policy.Run {
	b := e.boundsOf(w, lim)
	return &policy.Run{
		Step: s.N, MaxSteps: b.MaxSteps,
		Spent: workflowSpent(tx, w.ID, s.N), MaxSpend: b.MaxSpend,
		PastDeadline: pastDeadline(b, now),
		Attempt:      s.Attempts + 1, MaxAttempts: b.MaxAttempts,
	}
}

// workflowSpent is what workflow wf's refunds other than step n have
// spent: steps done, started or unknown, as the other totals count.
func workflowSpent(tx *store.Tx, wf string, n int) money.Cents {
	steps, _ := tx.Steps(wf) // a workflow without steps has spent nothing
	var spent money.Cents
	for _, s := range steps {
		if s.N == n || s.Tool != tool.IssueRefund {
			continue
		}
		switch s.Status {
		case store.StepDone, store.StepStarted, store.StepUnknown:
			spent += s.Args.Amount
		}
	}
	return spent
}

// bounded is the policy's answer res with the bounds of r applied: an
// answer other than DENY becomes a DENY under the first bound r exceeds,
// in the order the call policy checks them (B3, B1, B2, B4).
func bounded(res policy.Result, in policy.Input) policy.Result {
	r := in.Workflow
	if res.Decision == policy.Deny || r == nil {
		return res
	}
	rule := ""
	switch {
	case r.PastDeadline:
		rule = RuleDeadline
	case r.Step > r.MaxSteps:
		rule = RuleStepLimit
	case in.Tool == tool.IssueRefund && r.Spent+in.Args.Amount > r.MaxSpend:
		rule = RuleSpendLimit
	case r.Attempt > r.MaxAttempts:
		rule = RuleAttemptLimit
	default:
		return res
	}
	res.Decision, res.Rule = policy.Deny, rule
	return res
}

// endPastDeadline ends the open steps (pending, held, waiting for an
// approval) of workflow wfID denied under B3 if its deadline has passed,
// so that it pays nothing more. Steps started or unknown are left to
// resume: their effect may have happened. The caller holds the
// workflow's lock.
func (e *Engine) endPastDeadline(wfID string) error {
	lim, err := e.policy.Limits()
	if err != nil {
		return nil // no bundle, no decision: nothing runs either
	}
	// Nearly every call comes before the deadline: read first, so that it
	// costs no commit on the proposal's path.
	var past bool
	if err := e.db.View(func(tx *store.Tx) error {
		w, err := tx.Workflow(wfID)
		if errors.Is(err, store.ErrNotFound) {
			return nil // not opened yet (ProposeOpening): no deadline has passed
		}
		past = err == nil && pastDeadline(e.boundsOf(w, lim), e.clock.Now())
		return err
	}); err != nil || !past {
		return err
	}
	defer e.changes.changed(wfID)
	return e.db.Batch(func(tx *store.Tx) error {
		w, err := tx.Workflow(wfID)
		if err != nil {
			return err
		}
		now := e.clock.Now()
		if !pastDeadline(e.boundsOf(w, lim), now) {
			return nil
		}
		steps, err := tx.Steps(wfID)
		if err != nil {
			return err
		}
		for _, s := range steps {
			switch s.Status {
			case store.StepPending, store.StepHeld, store.StepWaitingApproval:
			default:
				continue
			}
			s.Decision, s.Rule = string(policy.Deny), RuleDeadline
			why := Explain(policy.Result{Decision: policy.Deny, Rule: RuleDeadline}, policy.Input{Tool: s.Tool}, lim)
			s.Reason = &why
			r, err := e.deny(tx, reservation{step: s}, RuleDeadline, now)
			if err != nil {
				return err
			}
			if err := e.auditTx(tx, stepRecord(audit.KindResult, audit.ActorEngine, r.step, map[string]any{
				"status": string(r.step.Status), "rule": RuleDeadline, "note": r.step.Note,
			})); err != nil {
				return err
			}
		}
		return nil
	})
}

func (e *Engine) endPastDeadlineLocked(ctx context.Context, wfID string) error {
	release, err := e.lock(ctx, wfID)
	if err != nil {
		return err
	}
	defer release()
	return e.endPastDeadline(wfID)
}
