package engine_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

// gated is the harness's policy with one evaluation held: the first
// decision about an amount of hold waits until release is closed.
type gated struct {
	*policy.Engine
	hold    money.Cents
	once    sync.Once
	started chan struct{}
	release chan struct{}
}

func (g *gated) Decide(ctx context.Context, in policy.Input) (policy.Result, error) {
	if in.Args.Amount == g.hold {
		g.once.Do(func() { close(g.started); <-g.release })
	}
	return g.Engine.Decide(ctx, in)
}

// A slow evaluation holds no writer: another workflow's refund on the same
// order runs to done while the first call's policy is still evaluating,
// and the first call, whose verdict was reached on the facts before that
// refund, is decided again on the facts as they are (the order's total
// now needs an approval) instead of spending headroom that is gone.
func TestASlowEvaluationBlocksNoOtherWorkflowAndAStaleVerdictIsDecidedAgain(t *testing.T) {
	h := newHarness(t, engine.DefaultControls())
	g := &gated{Engine: h.pol, hold: 3000, started: make(chan struct{}), release: make(chan struct{})}
	c := h.control
	h.eng = engine.New(engine.Options{Store: h.db, Policy: g, Systems: h.sys, Clock: h.clock, Controls: &c})
	ctx := context.Background()
	h.workflow("rep-ana", "W1")
	h.workflow("rep-ana", "W2")
	first := make(chan store.Step, 1)
	go func() {
		s, err := h.eng.Propose(ctx, person("rep-ana"), "W1", tool.IssueRefund, []byte(`{"order":"O-1001","amount":3000}`))
		if err != nil {
			t.Error(err)
		}
		first <- s
	}()
	<-g.started
	second := make(chan store.Step, 1)
	go func() {
		s, err := h.eng.Propose(ctx, person("rep-ana"), "W2", tool.IssueRefund, []byte(`{"order":"O-1001","amount":2500}`))
		if err != nil {
			t.Error(err)
		}
		second <- s
	}()
	select {
	case s := <-second:
		if s.Status != store.StepDone {
			t.Fatalf("W2 while W1 evaluates: %s (%s), want done", s.Status, s.Note)
		}
	case <-time.After(20 * time.Second): // a guard against hanging, not a wait
		close(g.release)
		t.Fatal("W2 did not finish while W1's policy evaluation was held: the evaluation blocks other workflows")
	}
	close(g.release)
	if s := <-first; s.Status != store.StepWaitingApproval {
		t.Fatalf("W1 after W2 spent the order's auto headroom: %s (%s, rule %s), want waiting_approval", s.Status, s.Note, s.Rule)
	}
}

// counting is the harness's policy counting its evaluations.
type counting struct {
	*policy.Engine
	mu    sync.Mutex
	calls int
}

func (c *counting) Decide(ctx context.Context, in policy.Input) (policy.Result, error) {
	c.mu.Lock()
	c.calls++
	c.mu.Unlock()
	return c.Engine.Decide(ctx, in)
}

// With nothing changing between them, the verdict made outside the writer
// is the decision: the policy is asked once per call, not again inside
// (the input built outside is the one the writer builds, now included).
func TestAnUncontendedCallAsksThePolicyOnce(t *testing.T) {
	h := newHarness(t, engine.DefaultControls())
	p := &counting{Engine: h.pol}
	c := h.control
	h.eng = engine.New(engine.Options{Store: h.db, Policy: p, Systems: h.sys, Clock: h.clock, Controls: &c})
	h.workflow("rep-ana", "W1")
	for i, amount := range []string{"1500", "2500"} {
		s, err := h.eng.Propose(context.Background(), person("rep-ana"), "W1", tool.IssueRefund, []byte(`{"order":"O-1001","amount":`+amount+`}`))
		if err != nil || s.Status != store.StepDone {
			t.Fatalf("refund %s: %s, %v", amount, s.Status, err)
		}
		if p.calls != i+1 {
			t.Errorf("after %d calls the policy was asked %d times, want %d", i+1, p.calls, i+1)
		}
	}
}
