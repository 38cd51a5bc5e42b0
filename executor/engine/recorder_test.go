package engine_test

import (
	"context"
	"sync"

	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/policy"
)

// recorder is the harness's real policy with a window on it: it keeps the
// input of every decision and, while fail is set, answers Decide with it.
type recorder struct {
	*policy.Engine
	mu     sync.Mutex
	inputs []policy.Input
	fail   error
}

var _ engine.Policy = (*recorder)(nil)

func (r *recorder) Decide(ctx context.Context, in policy.Input) (policy.Result, error) {
	r.mu.Lock()
	r.inputs = append(r.inputs, in)
	fail := r.fail
	r.mu.Unlock()
	if fail != nil {
		return policy.Result{}, fail
	}
	return r.Engine.Decide(ctx, in)
}

func (r *recorder) setFail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fail = err
}

// last is the input of the latest decision.
func (r *recorder) last() policy.Input {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.inputs) == 0 {
		return policy.Input{}
	}
	return r.inputs[len(r.inputs)-1]
}

// record rebuilds the harness's engine over the same store and systems,
// with a recorder in front of its policy.
func (h *harness) record() *recorder {
	r := &recorder{Engine: h.pol}
	c := h.control
	h.eng = engine.New(engine.Options{Store: h.db, Policy: r, Systems: h.sys, Clock: h.clock, Controls: &c})
	return r
}
