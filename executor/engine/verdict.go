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
	v := verdict{now: e.clock.Now()}
	lim, err := e.policy.Limits()
	if err != nil {
		return v
	}
	off := false
	if err := e.db.View(func(tx *store.Tx) error {
		// A switched-off tool is held before any decision: ask nothing.
		off = e.controls.CheckSwitchAtExecution && !tx.Switch(string(s.Tool))
		v.in = e.input(tx, w, s, f, lim, v.now)
		return nil
	}); err != nil || off {
		return v
	}
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
	return policy.Input{User: delegation(w), Tool: s.Tool, Args: s.Args, Order: f.order, Totals: e.totals(tx, w, s, lim, now),
		Workflow: e.runOf(tx, w, s, lim, now), Now: now}
}

// prefetch reads ahead, in one round trip on PostgreSQL (store.Tx.Prefetch),
// what a decision transaction on step s of w reads: the step and its
// workflow, the call's entry, the tool's switch, mode and breaker, the
// active bundle, and the totals of the call's order, the rep's day and the
// agent's hour at now. Limits that cannot be read leave the totals out;
// the decision then reads them itself.
func (e *Engine) prefetch(tx *store.Tx, w store.Workflow, s store.Step, now time.Time) {
	reads := []store.Read{
		store.ReadStep(s.Workflow, s.N), store.ReadWorkflow(s.Workflow), store.ReadCall(s.Workflow, s.Call),
		store.ReadSwitch(string(s.Tool)), store.ReadMode(string(s.Tool)), store.ReadBreaker(string(s.Tool), w.AgentVersion),
		store.ReadActiveDigest(), store.ReadOrderSpent(s.Args.Order), store.ReadOrderReships(s.Args.Order),
	}
	if lim, err := e.policy.Limits(); err == nil && s.Tool == tool.IssueRefund {
		reads = append(reads, store.ReadRepSpent(w.User, now.Add(-lim.RepWindow)), store.ReadAgentSpent(now.Add(-time.Hour)))
	}
	tx.Prefetch(reads...)
}
