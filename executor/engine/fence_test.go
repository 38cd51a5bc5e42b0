package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

// refund50 is a $50 refund on O-1003, which rep-ben's region holds and
// whose customer paid $80: two of them are more than was paid.
const refund50 = `{"order":"O-1003","amount":5000}`

// TestResolveAfterIsRecordedBeforeDispatch: the write-ahead that marks a
// step started records its token deadline, a dispatch TTL ahead (the
// shorter of Options.TokenTTL and the bundle's token_ttl_seconds, 60 s in
// p1), and the resolve time, the deadline plus the receivers' skew; a step
// left started or unknown carries them.
func TestResolveAfterIsRecordedBeforeDispatch(t *testing.T) {
	for _, tc := range []struct {
		name     string
		ttl      time.Duration
		deadline time.Duration
	}{
		{"default TTL, 15 s", 0, engine.DefaultTokenTTL},
		{"a longer TTL than the bundle's: the bundle's 60 s", 90 * time.Second, time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, engine.DefaultControls())
			c := h.control
			h.eng = engine.New(engine.Options{Store: h.db, Policy: h.pol, Systems: h.sys, Clock: h.clock, Controls: &c, TokenTTL: tc.ttl})
			h.workflow("rep-ben", "W1")
			h.workflow("rep-ana", "W2")
			now := h.clock.Now()
			h.sys.failNext = 1
			refund, err := h.eng.Propose(context.Background(), person("rep-ben"), "W1", tool.IssueRefund, json.RawMessage(refund50))
			if !errors.Is(err, engine.ErrUnavailable) {
				t.Fatalf("refund with the ledger down: %v", err)
			}
			h.sys.dropNext = 1
			reship := h.propose("rep-ana", "W2", tool.ReshipOrder, reshipO1001)
			for _, s := range []store.Step{refund, reship} {
				if s.Status != store.StepStarted && s.Status != store.StepUnknown {
					t.Fatalf("%s: %s, want started or unknown", s.Tool, s.Status)
				}
				if !s.TokenDeadline.Equal(now.Add(tc.deadline)) || !s.ResolveAfter.Equal(now.Add(tc.deadline+engine.DefaultReceiverSkew)) {
					t.Errorf("%s: deadline %s, resolve_after %s; want %s and %s later", s.Tool, s.TokenDeadline, s.ResolveAfter,
						tc.deadline, engine.DefaultReceiverSkew)
				}
			}
		})
	}
}

// TestUnavailableKeepsTheReservation: the ledger answers a $50 refund on
// an $80 order 503. The refund keeps its reservation, so a second $50
// refund in another workflow is denied as more than was paid; a resume
// while a request of it may still land sends nothing; once its tokens
// have expired and the ledger has no entry under its key, it is released,
// decided again and paid once. With the fence removed the 503 releases it
// at once and the second refund is paid too.
func TestUnavailableKeepsTheReservation(t *testing.T) {
	for _, tc := range []struct {
		name   string
		fenced bool
		second store.StepStatus
	}{
		{"fenced: the second refund is denied", true, store.StepDenied},
		{"fence removed: the second refund is paid", false, store.StepDone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := engine.DefaultControls()
			c.EffectFence = tc.fenced
			h := newHarness(t, c)
			ctx := context.Background()
			h.workflow("rep-ben", "W1")
			h.workflow("rep-ben", "W2")
			h.sys.failNext = 1
			first, err := h.eng.Propose(ctx, person("rep-ben"), "W1", tool.IssueRefund, json.RawMessage(refund50))
			if !errors.Is(err, engine.ErrUnavailable) {
				t.Fatalf("W1 with the ledger down: %v", err)
			}
			second := h.propose("rep-ben", "W2", tool.IssueRefund, refund50)
			if second.Status != tc.second {
				t.Fatalf("W1 %s (%s); W2 %s %s, want %s", first.Status, first.Note, second.Status, second.Rule, tc.second)
			}
			if !tc.fenced {
				return
			}
			if first.Status != store.StepStarted || !first.ReleaseOnProof {
				t.Fatalf("W1 after the 503: %s, release on proof %v; want started, released only on proof", first.Status, first.ReleaseOnProof)
			}
			if second.Rule != "R4-exceeds-amount-paid" {
				t.Errorf("W2 denied by %s, want R4-exceeds-amount-paid", second.Rule)
			}
			_, steps := h.resume("rep-ben", "W1")
			if steps[0].Status != store.StepStarted || h.sys.refunds != 0 {
				t.Fatalf("a resume before resolve_after: %s (%s), %d refunds; want started, nothing sent", steps[0].Status, steps[0].Note, h.sys.refunds)
			}
			h.clock.Set(first.ResolveAfter)
			_, steps = h.resume("rep-ben", "W1")
			if steps[0].Status != store.StepDone || steps[0].Attempts != 2 || h.sys.refunds != 1 {
				t.Fatalf("after resolve_after: %s (%s), %d attempts, %d refunds; want done on a second attempt, 1 refund",
					steps[0].Status, steps[0].Note, steps[0].Attempts, h.sys.refunds)
			}
		})
	}
}

// held is fakeSystems whose first Execute is held until release, then
// answered with refusal (without an effect): a sidecar whose request was
// held by the system of record past its token's exp.
type held struct {
	*fakeSystems
	once    sync.Once
	inside  chan struct{}
	release chan struct{}
	refusal error
}

func (s *held) Execute(ctx context.Context, as engine.Actor, c engine.Call) (json.RawMessage, error) {
	first := false
	s.once.Do(func() { first = true })
	if !first {
		return s.fakeSystems.Execute(ctx, as, c)
	}
	close(s.inside)
	<-s.release
	return nil, s.refusal
}

// TestStaleHolderIsFencedOff: sidecar A dispatches a $50 refund and is
// held up (its renewals stop, as a paused process's would) until its lease
// expires; B takes the workflow over, finds no entry once A's tokens have
// expired, pays it and records it done. A's request then comes back
// refused (token_expired). With lease fencing A's write of that refusal is
// refused (ErrFenced) and B's done stands; removed, A overwrites it with
// denied, which releases the $50 the ledger paid.
func TestStaleHolderIsFencedOff(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fencing bool
		want    store.StepStatus
	}{
		{"fenced: B's done stands", true, store.StepDone},
		{"fencing removed: A overwrites B's done", false, store.StepDenied},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := engine.DefaultControls()
			c.LeaseFencing = tc.fencing
			h := newHarness(t, c)
			sys := &held{fakeSystems: h.sys, inside: make(chan struct{}), release: make(chan struct{}),
				refusal: &engine.Refused{Status: 401, Code: "token_expired", Message: "the token expired before the request could be committed"}}
			sidecar := func(holder string, renew time.Duration) *engine.Engine {
				return engine.New(engine.Options{Store: h.db, Policy: h.pol, Systems: sys, Clock: h.clock, Controls: &c,
					Leases: &engine.Leases{Holder: holder, TTL: time.Minute, RenewEvery: renew}})
			}
			a, b := sidecar("a", time.Hour), sidecar("b", 0)
			h.eng = a
			h.workflow("rep-ben", "W1")
			done := make(chan error, 1)
			go func() {
				_, err := a.Propose(context.Background(), person("rep-ben"), "W1", tool.IssueRefund, json.RawMessage(refund50))
				done <- err
			}()
			<-sys.inside
			h.clock.Advance(2 * time.Minute) // A's lease, and every token minted for the step, have expired
			if err := b.Sweep(context.Background()); err != nil {
				t.Fatal(err)
			}
			b.Close()
			h.eng = b
			if s := h.stepStatus("W1"); s != store.StepDone || h.sys.refunds != 1 {
				t.Fatalf("after B took over: %s, %d refunds; want done, 1", s, h.sys.refunds)
			}
			close(sys.release)
			err := <-done
			a.Close()
			if tc.fencing && !errors.Is(err, engine.ErrFenced) {
				t.Errorf("A's late write: %v, want ErrFenced", err)
			}
			if s := h.stepStatus("W1"); s != tc.want {
				t.Fatalf("W1 after A came back: %s, want %s", s, tc.want)
			}
		})
	}
}

// TestParkedLeaseIsResolvedBySweep: a reship whose answer was lost and
// whose request may still land is left unknown; the sidecar lets the
// workflow go with its lease parked until the step's resolve time, and
// any sidecar's sweep after it resolves the step: no shipment carries its
// reference, so it ships, once.
func TestParkedLeaseIsResolvedBySweep(t *testing.T) {
	h := newHarness(t, engine.DefaultControls())
	a, b := h.sidecar("a", nil), h.sidecar("b", nil)
	h.eng = a
	h.workflow("rep-ana", "W1")
	h.sys.dropNext = 1
	s := h.propose("rep-ana", "W1", tool.ReshipOrder, reshipO1001)
	a.Close()
	l, err := h.lease("W1")
	if err != nil || !l.Parked() || !l.Expires.Equal(s.ResolveAfter) {
		t.Fatalf("lease after A let go: %+v %v; want parked until the step's resolve_after %s", l, err, s.ResolveAfter)
	}
	if err := b.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := h.stepStatus("W1"); st != store.StepUnknown || h.sys.shipments["O-1001"] != 0 {
		t.Fatalf("a sweep before the wait is over: %s, %d shipments; want unknown, none", st, h.sys.shipments["O-1001"])
	}
	h.clock.Set(s.ResolveAfter)
	if err := b.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if st := h.stepStatus("W1"); st != store.StepDone || h.sys.shipments["O-1001"] != 1 {
		t.Fatalf("after the sweep at resolve_after: %s, %d shipments; want done, 1", st, h.sys.shipments["O-1001"])
	}
	if _, err := h.lease("W1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("lease after the step was resolved: %v, want none", err)
	}
}
