package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/countersign/countersign/executor/audit"
	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/store"
)

// Person is an authenticated caller: the claims of their bearer token.
type Person struct {
	ID            string
	Role          string
	Region        string
	Scopes        []string
	RefundCeiling money.Cents
	ApproveLimit  money.Cents
	// Expires is the exp of the token the person presented. A workflow's
	// delegation lasts as long as the token that created or last refreshed
	// it. Zero means no token (in-process drivers such as the drill): a
	// workflow it opens never expires.
	Expires time.Time
}

// Roles.
const (
	RoleRep      = "rep"
	RoleLead     = "lead"
	RoleOperator = "operator"
)

// InvalidError is a request field that breaks the API's schema (422).
type InvalidError struct {
	Field   string
	Problem string
}

func (e *InvalidError) Error() string { return fmt.Sprintf("%s: %s", e.Field, e.Problem) }

// CreateWorkflow opens a workflow for ticket on behalf of rep p, for an
// agent that declares no version (OpenWorkflow says how).
func (e *Engine) CreateWorkflow(ctx context.Context, p Person, id, ticket string) (w store.Workflow, created bool, err error) {
	return e.OpenWorkflow(ctx, p, NewWorkflow{ID: id, Ticket: ticket})
}

// NewWorkflow is what an agent asks for when it opens a workflow.
type NewWorkflow struct {
	// ID is the workflow's id; empty gets a generated one.
	ID     string
	Ticket string
	// AgentVersion is the agent's declared version (may be empty): the
	// circuit breaker counts failures per tool and agent version.
	AgentVersion string
	// Bounds narrow the active bundle's bounds for this workflow.
	Bounds Bounds
}

// OpenWorkflow opens workflow nw on behalf of rep p, bounded by the active
// bundle's bounds as nw narrows them. Asking again with the same id,
// ticket, agent version and any bounds it already has, for the same rep,
// returns the existing workflow with created false.
func (e *Engine) OpenWorkflow(ctx context.Context, p Person, nw NewWorkflow) (w store.Workflow, created bool, err error) {
	o, err := e.newOpening(p, nw)
	if err != nil {
		return store.Workflow{}, false, err
	}
	// The workflow records the revision in force: the fleet's.
	err = e.underActiveBundle(ctx, func() error {
		return e.db.Batch(func(tx *store.Tx) error {
			w, created = store.Workflow{}, false // this may run more than once
			if err := e.stale(tx); err != nil {
				return err
			}
			if w, created, err = e.opened(tx, p, o); err != nil || !created {
				return err
			}
			return e.createWorkflow(tx, w)
		})
	})
	return w, created, err
}

// opening is a workflow that a request opens unless its id is in use: as
// the agent asked for it, and the record it gets if it is new.
type opening struct {
	asked NewWorkflow
	w     store.Workflow
}

// newOpening checks what rep p asks for in nw and makes the workflow's
// record, with a generated id when nw has none.
func (e *Engine) newOpening(p Person, nw NewWorkflow) (*opening, error) {
	if p.Role != RoleRep {
		return nil, fmt.Errorf("create workflow: only a rep's delegation can open one: %w", ErrForbidden)
	}
	if nw.ID == "" {
		nw.ID = "W-" + ulid.Make().String()
	}
	if err := checkID("id", nw.ID); err != nil {
		return nil, err
	}
	if err := checkID("ticket", nw.Ticket); err != nil {
		return nil, err
	}
	if nw.AgentVersion != "" {
		if err := checkID("agent_version", nw.AgentVersion); err != nil {
			return nil, err
		}
	}
	now := e.clock.Now()
	bounds, err := e.boundsFor(nw.Bounds, now)
	if err != nil {
		return nil, err
	}
	return &opening{asked: nw, w: store.Workflow{
		ID: nw.ID, Ticket: nw.Ticket, User: p.ID, Status: store.WorkflowRunning,
		Delegation: store.Delegation{ID: p.ID, Role: p.Role, Region: p.Region,
			Scopes: p.Scopes, RefundCeiling: p.RefundCeiling, Expires: p.Expires},
		Created: now, Updated: now, AgentVersion: nw.AgentVersion, Bounds: bounds,
	}}, nil
}

// opened reads the workflow o opens, in tx: the one already stored under
// its id when p asked for it as it is (create false), else the new record
// under the active bundle's revision (create true: the caller stores it in
// tx). An id in use by another rep, or asked for with another ticket,
// agent version or bounds, is ErrWorkflowExists.
func (e *Engine) opened(tx *store.Tx, p Person, o *opening) (w store.Workflow, create bool, err error) {
	old, err := tx.Workflow(o.w.ID)
	switch {
	case err == nil && old.User != p.ID:
		// Another rep learns that the id is taken, as any answer but a new
		// workflow would tell them, and nothing else: not whose it is, nor
		// its ticket, nor how it stands.
		return store.Workflow{}, false, fmt.Errorf("%w: %q", ErrWorkflowExists, o.w.ID)
	case err == nil:
		if differs := differences(old, o.asked); differs != "" {
			return store.Workflow{}, false, fmt.Errorf("%w: workflow %q was opened %s", ErrWorkflowExists, o.w.ID, differs)
		}
		return old, false, nil
	case !errors.Is(err, store.ErrNotFound):
		return store.Workflow{}, false, err
	}
	w = o.w
	w.PolicyRevision = e.policy.Revision()
	return w, true, nil
}

// createWorkflow stores the new workflow w and its audit record in tx:
// who opened it, for which agent and ticket, under which revision, within
// which bounds. The record is what a reviewer reads for "who asked".
func (e *Engine) createWorkflow(tx *store.Tx, w store.Workflow) error {
	if err := tx.CreateWorkflow(w); err != nil {
		return err
	}
	return e.auditTx(tx, audit.Record{Kind: audit.KindWorkflow, Actor: w.User, Workflow: w.ID, At: w.Created,
		Detail: map[string]any{
			"ticket": w.Ticket, "agent": e.agent, "agent_version": w.AgentVersion, "revision": w.PolicyRevision,
			"bounds": map[string]any{"max_steps": w.Bounds.MaxSteps, "max_spend": int64(w.Bounds.MaxSpend),
				"deadline": w.Bounds.Deadline.UTC().Format(time.RFC3339), "max_attempts": w.Bounds.MaxAttempts},
		}})
}

// Workflow returns a workflow with its steps. A rep sees only their own;
// leads and operators see all.
func (e *Engine) Workflow(ctx context.Context, p Person, id string) (store.Workflow, []store.Step, error) {
	e.locks.settle(id)
	var w store.Workflow
	var steps []store.Step
	err := e.db.View(func(tx *store.Tx) error {
		var err error
		if w, err = e.readableWorkflow(tx, p, id); err != nil {
			return err
		}
		steps, err = tx.Steps(id)
		return err
	})
	return w, steps, err
}

// Snapshot is a workflow as one read transaction saw it: what a reader
// needs to show the workflow without reading again per step.
type Snapshot struct {
	Workflow store.Workflow
	Steps    []store.Step
	// Approvals are the approvals the steps name, by id. A step whose
	// approval record is missing has no entry.
	Approvals map[string]store.Approval
}

// Snapshot returns a workflow, its steps and their approvals from one read
// transaction, so they agree with each other, once the workflow's last
// answered record is durable. A rep sees only their own; leads and
// operators see all.
func (e *Engine) Snapshot(ctx context.Context, p Person, id string) (Snapshot, error) {
	e.locks.settle(id)
	var snap Snapshot
	err := e.db.View(func(tx *store.Tx) error {
		w, err := e.readableWorkflow(tx, p, id)
		if err != nil {
			return err
		}
		steps, err := tx.Steps(id)
		if err != nil {
			return err
		}
		approvals, err := stepApprovals(tx, steps)
		snap = Snapshot{Workflow: w, Steps: steps, Approvals: approvals}
		return err
	})
	return snap, err
}

// stepApprovals reads the approvals that steps name.
func stepApprovals(tx *store.Tx, steps []store.Step) (map[string]store.Approval, error) {
	out := map[string]store.Approval{}
	for _, s := range steps {
		if s.Approval == "" {
			continue
		}
		a, err := tx.Approval(s.Approval)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("approval %q of step %s/%d: %w", s.Approval, s.Workflow, s.N, err)
		}
		out[a.ID] = a
	}
	return out, nil
}

// readableWorkflow reads workflow id for p. Another rep's workflow is, to
// a rep, exactly as absent as an id nobody used: the same error, word for
// word, so that no answer tells a rep which ids exist or whose they are.
// The owner is the rep whose sub opened it, byte for byte: ownership
// grants, so it is not widened to other spellings (identity.Same is for
// the checks that refuse).
func (e *Engine) readableWorkflow(tx *store.Tx, p Person, id string) (store.Workflow, error) {
	w, err := tx.Workflow(id)
	if err == nil && p.Role == RoleRep && w.User != p.ID {
		w, err = store.Workflow{}, store.ErrNotFound
	}
	if errors.Is(err, store.ErrNotFound) {
		return w, notFound("workflow", id)
	}
	return w, err
}

// ownWorkflow is readableWorkflow for acting: only the rep it belongs to.
func (e *Engine) ownWorkflow(tx *store.Tx, p Person, id string) (store.Workflow, error) {
	w, err := e.readableWorkflow(tx, p, id)
	if err == nil && w.User != p.ID {
		err = fmt.Errorf("workflow %q: only its rep's agent may change it: %w", id, ErrForbidden)
	}
	return w, err
}

// Approval returns one approval record.
func (e *Engine) Approval(ctx context.Context, id string) (store.Approval, error) {
	var a store.Approval
	err := e.db.View(func(tx *store.Tx) error {
		var err error
		a, err = tx.Approval(id)
		if errors.Is(err, store.ErrNotFound) {
			err = notFound("approval", id)
		}
		return err
	})
	return a, err
}

// workflowStatus derives a workflow's status from its steps.
func workflowStatus(steps []store.Step) store.WorkflowStatus {
	has := map[store.StepStatus]bool{}
	for _, s := range steps {
		has[s.Status] = true
	}
	switch {
	case has[store.StepUnknown]:
		return store.WorkflowNeedsReconciliation
	case has[store.StepHeld]:
		return store.WorkflowPaused
	case has[store.StepWaitingApproval]:
		return store.WorkflowWaitingApproval
	case has[store.StepPending] || has[store.StepStarted] || len(steps) == 0:
		return store.WorkflowRunning
	case has[store.StepDenied]:
		return store.WorkflowFailed
	default:
		return store.WorkflowDone
	}
}

// refreshWorkflow recomputes and stores the workflow's status.
func (e *Engine) refreshWorkflow(tx *store.Tx, id string) error {
	w, err := tx.Workflow(id)
	if err != nil {
		return err
	}
	steps, err := tx.Steps(id)
	if err != nil {
		return err
	}
	w.Status = workflowStatus(steps)
	w.Steps = len(steps)
	w.Updated = e.clock.Now()
	return tx.PutWorkflow(w)
}

// differences says how a repeated open of workflow old by its own rep
// differs from the first, "" when it is the same request (which answers
// the workflow).
func differences(old store.Workflow, nw NewWorkflow) string {
	switch {
	case old.Ticket != nw.Ticket:
		return "for another ticket"
	case old.AgentVersion != nw.AgentVersion:
		return "with another agent_version"
	case !sameAsked(old.Bounds, nw.Bounds):
		return "with other bounds"
	}
	return ""
}
