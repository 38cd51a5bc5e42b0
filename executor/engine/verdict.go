package engine

import (
	"context"
	"reflect"
	"time"

	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

// verdict is a decision made before the write transaction, from facts read
// in a read transaction, so that evaluating the policy holds no writer and
// a slow evaluation delays only its own workflow. The write transaction
// uses it only if the facts are still the same (holds); otherwise it
// decides again, under its own lock, so two calls never spend the same
// headroom.
type verdict struct {
	// now is the moment of the decision: the rolling windows, the decision
	// log and the reservation all use it, in both transactions.
	now time.Time
	// in is everything the policy saw; result is its answer, usable only
	// when ok (an evaluation that failed is made again inside, and fails
	// there as it always did).
	in     policy.Input
	result policy.Result
	ok     bool
}

// preDecide reads the facts of step s and evaluates the policy outside any
// write transaction. It never fails: a verdict it could not reach is
// simply not used.
func (e *Engine) preDecide(ctx context.Context, w store.Workflow, s store.Step, f facts) verdict {
	now := e.clock.Now()
	var r reading
	if err := e.db.View(func(tx *store.Tx) error {
		e.prefetch(tx, w, s, now)
		r = e.read(tx, w, s, now)
		return nil
	}); err != nil {
		return verdict{now: now}
	}
	return e.decideOn(ctx, w, s, f, r)
}

// reading is what a verdict reads from the store at now: whether the tool
// is switched off, and the policy's input but for the order and the
// delegation, under the limits lim (ok: they and the facts were read).
type reading struct {
	now    time.Time
	ok     bool
	off    bool
	totals policy.Totals
	run    *policy.Run
}

// read is the reading of step s of w in tx at now.
func (e *Engine) read(tx *store.Tx, w store.Workflow, s store.Step, now time.Time) reading {
	r := reading{now: now}
	lim, err := e.policy.Limits()
	if err != nil {
		return r
	}
	r.ok = true
	// A switched-off tool is held before any decision: ask nothing.
	r.off = e.controls.CheckSwitchAtExecution && !tx.Switch(string(s.Tool))
	r.totals, r.run = e.totals(tx, w, s, lim, now), e.runOf(tx, w, s, lim, now)
	return r
}

// decideOn evaluates the policy on step s of w with the facts f and the
// reading r, outside any transaction.
func (e *Engine) decideOn(ctx context.Context, w store.Workflow, s store.Step, f facts, r reading) verdict {
	v := verdict{now: r.now}
	if !r.ok || r.off {
		return v
	}
	v.in = r.input(w, s, f)
	res, err := e.policy.Decide(ctx, v.in)
	v.result, v.ok = res, err == nil
	return v
}

// holds reports whether the verdict answers in: the same input (order,
// delegation, call, order total, rep's day, agent's hour, order reships,
// where the workflow stands against its bounds) under the same active
// bundle.
func (v verdict) holds(in policy.Input, revision string) bool {
	return v.ok && v.result.Revision == revision && reflect.DeepEqual(v.in, in)
}

// input is the policy's question about step s, with the totals as tx sees
// them at now.
func (e *Engine) input(tx *store.Tx, w store.Workflow, s store.Step, f facts, lim policy.Limits, now time.Time) policy.Input {
	return reading{now: now, totals: e.totals(tx, w, s, lim, now), run: e.runOf(tx, w, s, lim, now)}.input(w, s, f)
}

// input is the policy's question about step s of w with the facts f, on
// the reading r: the one question both sides of the writer ask.
func (r reading) input(w store.Workflow, s store.Step, f facts) policy.Input {
	return policy.Input{User: delegation(w), Tool: s.Tool, Args: s.Args, Order: f.order, Totals: r.totals, Workflow: r.run, Now: r.now}
}

// prefetch reads ahead, in one round trip on PostgreSQL (store.Tx.Prefetch),
// what a decision transaction on step s of w reads: the step and its
// workflow, the call's entry, the tool's switch, mode and breaker, the
// active bundle, the totals of the call's order, the rep's day and the
// agent's hour at now, the workflow's steps (where it stands against its
// bounds, and the walk that refreshes it after a step is written) and the
// credential epoch (epochIn). Limits that cannot be read leave the totals
// out; the decision then reads them itself. A write transaction adds
// decisionNumbers to more.
func (e *Engine) prefetch(tx *store.Tx, w store.Workflow, s store.Step, now time.Time, more ...store.Read) {
	tx.Prefetch(append(e.reads(w, s, now), more...)...)
}

// reads are what prefetch reads.
func (e *Engine) reads(w store.Workflow, s store.Step, now time.Time) []store.Read {
	reads := []store.Read{
		store.ReadStep(s.Workflow, s.N), store.ReadWorkflow(s.Workflow), store.ReadCall(s.Workflow, s.Call),
		store.ReadSwitch(string(s.Tool)), store.ReadMode(string(s.Tool)), store.ReadBreaker(string(s.Tool), w.AgentVersion),
		store.ReadActiveDigest(), store.ReadOrderSpent(s.Args.Order), store.ReadOrderReships(s.Args.Order),
		store.ReadSteps(s.Workflow), store.ReadCredentialEpoch(),
	}
	if lim, err := e.policy.Limits(); err == nil && s.Tool == tool.IssueRefund {
		reads = append(reads, store.ReadRepSpent(w.User, now.Add(-lim.RepWindow)), store.ReadAgentSpent(now.Add(-time.Hour)))
	}
	return reads
}

// decisionNumbers draws ahead the numbers of the records a decision
// writes, so that none costs a round trip of its own: its decision-log
// entry and its audit records (the decision and the dispatch, and the
// workflow's when the decision opens it).
func decisionNumbers(opening bool) []store.Read {
	reads := []store.Read{store.ReadNumbers(store.DecisionNumbers, 1), store.ReadNumbers(store.AuditNumbers, 3)}
	if opening {
		reads = append(reads, store.ReadNumbers(store.WorkflowNumbers, 1))
	}
	return reads
}

// epochIn is the store's credential epoch as tx reads it (0: none, or it
// could not be read), for the tokens minted right after it
// (credential.WithEpochRead).
func epochIn(tx *store.Tx) uint64 {
	epoch, err := tx.CredentialEpoch()
	if err != nil {
		return 0
	}
	return epoch
}
