package demo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign/cmd/devstack"
	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/sim/ledger"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

// The rows of a fleet member held up past its lease (a paused process): it
// sent a $50 refund on O-1003, paid $80, while the ledger held the write;
// another member takes the workflow over. Each runs two members of a fleet
// in process, over the stack's store (on either backend), its policy and
// its systems of record. The paused one renews nothing (its renewals would
// come every hour), so its lease expires as the simulated clock moves.

// fenceLeaseTTL is the members' lease TTL, in simulated time.
const fenceLeaseTTL = 5 * time.Second

// paidO1003 is what O-1003's customer paid: no more may be refunded.
const paidO1003 money.Cents = 8000

// fleetMember is an engine over s's store as another sidecar of a fleet
// runs it, under leases, as holder, renewing every renew.
func (s *stack) fleetMember(holder string, renew time.Duration, c engine.Controls) *engine.Engine {
	return engine.New(engine.Options{Store: s.Store, Policy: s.Policy, Systems: s.Systems, Clock: s.clock, Audit: s.Audit,
		Agent: devstack.AgentID, Controls: &c, Leases: &engine.Leases{Holder: holder, TTL: fenceLeaseTTL, RenewEvery: renew}})
}

// pausedScene is where both rows start: a stack with a paused member and
// a survivor, W1 and W2 open for rep-ben, and the paused member's $50
// refund in W1 held by the ledger (held gets its error when let go).
type pausedScene struct {
	*stack
	survivor *engine.Engine
	held     <-chan error
}

func startPaused(ctx context.Context, dir string, c engine.Controls) (*pausedScene, error) {
	st, err := start(ctx, dir, setup{controls: c})
	if err != nil {
		return nil, err
	}
	paused := st.fleetMember("paused", time.Hour, c)
	p := &pausedScene{stack: st, survivor: st.fleetMember("survivor", 0, c)}
	for _, wf := range []string{"W1", "W2"} {
		if err = st.open(ctx, "rep-ben", wf); err != nil {
			break
		}
	}
	if err == nil {
		p.held, err = st.pausedRefund(ctx, paused)
	}
	if err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// Close ends the survivor, then the stack.
func (p *pausedScene) Close() {
	p.survivor.Close()
	p.stack.Close()
}

// pausedRefund starts the paused member's $50 refund in W1 and returns
// once the ledger holds its request; the channel gets Propose's error
// when the request is let go.
func (s *stack) pausedRefund(ctx context.Context, paused *engine.Engine) (<-chan error, error) {
	if err := s.Ledger.SetFaults(ledger.Faults{DelayWritesMS: 60_000}); err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() {
		_, err := paused.Propose(ctx, person("rep-ben"), "W1", tool.IssueRefund, refundArgs("O-1003", 5000))
		done <- err
	}()
	deadline := time.After(30 * time.Second)
	for s.Ledger.Held() != 1 {
		select {
		case err := <-done:
			return nil, fmt.Errorf("the paused member's refund ended before the ledger held it: %v", err)
		case <-deadline:
			return nil, errors.New("the ledger never held the paused member's refund")
		case <-time.After(5 * time.Millisecond):
		}
	}
	return done, nil
}

// refundedOn is what the ledger refunded on order, in all.
func (s *stack) refundedOn(order string) (money.Cents, error) {
	refunds, err := s.refunds()
	var sum money.Cents
	for _, e := range refunds {
		if e.Order == order {
			sum += money.Cents(e.Amount)
		}
	}
	return sum, err
}

// pausedHolderRefund (item 4 of issue 20): the paused member's request is
// held; the survivor takes W1 over and its retry meets a 503; a second $50
// refund is proposed in W2; the held request lands. Invariant: no more
// refunded than paid. The effect fence keeps W1's reservation through the
// 503 (an earlier request may still land), so W2 is denied; removed, the
// 503 releases it and both are paid.
func pausedHolderRefund(ctx context.Context, dir string, c engine.Controls) (Outcome, error) {
	p, err := startPaused(ctx, dir, c)
	if err != nil {
		return Outcome{}, err
	}
	defer p.Close()
	st, survivor, held := p.stack, p.survivor, p.held
	if err := st.Ledger.SetFaults(ledger.Faults{Unavailable: 1}); err != nil {
		return Outcome{}, err
	}
	st.clock.Advance(fenceLeaseTTL + time.Second) // the paused lease expires; its token (15 s) still stands
	if err := survivor.Sweep(ctx); err != nil && !errors.Is(err, engine.ErrUnavailable) {
		return Outcome{}, err
	}
	w2, err := survivor.Propose(ctx, person("rep-ben"), "W2", tool.IssueRefund, refundArgs("O-1003", 5000))
	if err != nil && !errors.Is(err, engine.ErrUnavailable) {
		return Outcome{}, err
	}
	st.Ledger.ReleaseHeld()
	<-held // its own record is fenced off: it was taken over
	w1, err := st.step(ctx, "W1", 1)
	if err != nil {
		return Outcome{}, err
	}
	refunded, err := st.refundedOn("O-1003")
	if err != nil {
		return Outcome{}, err
	}
	return Outcome{Pass: refunded <= paidO1003, Evidence: fmt.Sprintf("%s refunded on %s paid; after the survivor's 503 W1 is %s, W2 %s",
		refunded, paidO1003, w1.Status, outcomeOf(w2))}, nil
}

// pausedHolderLateWrite: the paused member's request is held past the
// token's exp; the survivor takes W1 over once every token of it has
// expired, finds no entry, pays it and records it done; the held request
// is then refused (token_expired), and the paused member, back, records
// that refusal; a second $50 refund is proposed in W2. Invariant: no more
// refunded than paid. Lease fencing refuses the paused member's write; the
// survivor's done stands and W2 is denied. Removed, the late write
// overwrites done with denied, releasing the $50 the ledger paid, and W2
// is paid too.
func pausedHolderLateWrite(ctx context.Context, dir string, c engine.Controls) (Outcome, error) {
	p, err := startPaused(ctx, dir, c)
	if err != nil {
		return Outcome{}, err
	}
	defer p.Close()
	st, survivor, held := p.stack, p.survivor, p.held
	if err := st.Ledger.SetFaults(ledger.Faults{}); err != nil {
		return Outcome{}, err
	}
	st.clock.Advance(time.Minute) // the paused lease and every token minted for W1 have expired
	if err := survivor.Sweep(ctx); err != nil {
		return Outcome{}, err
	}
	_, steps, err := survivor.Workflow(ctx, person("ops-ida"), "W1") // once the survivor's record is durable
	if err != nil {
		return Outcome{}, err
	}
	if steps[0].Status != store.StepDone {
		return Outcome{}, fmt.Errorf("the survivor left W1 %s (%s), the scenario needs it done", steps[0].Status, steps[0].Note)
	}
	st.Ledger.ReleaseHeld()
	late := <-held
	w1, err := st.step(ctx, "W1", 1)
	if err != nil {
		return Outcome{}, err
	}
	w2, err := survivor.Propose(ctx, person("rep-ben"), "W2", tool.IssueRefund, refundArgs("O-1003", 5000))
	if err != nil {
		return Outcome{}, err
	}
	refunded, err := st.refundedOn("O-1003")
	if err != nil {
		return Outcome{}, err
	}
	how := "accepted"
	if errors.Is(late, engine.ErrFenced) {
		how = "refused"
	}
	return Outcome{Pass: refunded <= paidO1003, Evidence: fmt.Sprintf("%s refunded on %s paid; the paused member's late write %s, W1 %s; W2 %s",
		refunded, paidO1003, how, w1.Status, outcomeOf(w2))}, nil
}
