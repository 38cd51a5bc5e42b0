package sim

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

// A fleet in a world: two or three engines, each with its own policy
// engine, release service, clock and lease holder, on one store.DB (bbolt)
// opened once. The engine's leases, fencing numbers and parking live in
// the store (store/leases.go) and are read and written in the same
// transactions on bbolt as on PostgreSQL; what PostgreSQL adds (several
// processes, SERIALIZABLE retries, the sequencer's chaining) is
// tests/fleet's. So the engines see a fleet's semantics: a workflow is
// driven by one of them at a time, a lease left by a paused or crashed
// sidecar expires by that sidecar's peers' clocks, and Sweep or ResumeAll
// takes it over under a new fencing number.

// noRenewal is the sidecars' Leases.RenewEvery: a renewal would come on
// the wall clock, never within a seed. A lease lasts its TTL in simulated
// time, which is what a paused holder's does.
const noRenewal = 1000 * time.Hour

// paused is a sidecar's call held up in the middle of its dispatch: the
// request is written and the process stops before it is sent on, as a
// paused VM or a long GC does. The goroutine of the call waits in the
// network until the scheduler lets it go on (unpause).
type paused struct {
	wf     string
	what   string
	held   chan struct{} // closed by the network once it holds the request
	resume chan struct{} // closed by the scheduler to let the call go on
	done   chan pausedEnd
}

type pausedEnd struct {
	step store.Step
	err  error
}

// abandon lets a paused call go on and waits for it, when a world closes
// with one still held.
func (p *paused) abandon() {
	close(p.resume)
	<-p.done
}

// from is a sidecar's transport: the network, told who sends.
type from struct {
	n  *network
	sc *sidecar
}

func (f from) RoundTrip(req *http.Request) (*http.Response, error) { return f.n.roundTrip(f.sc, req) }

// active are the sidecars not paused.
func (w *world) active() []*sidecar {
	var out []*sidecar
	for _, sc := range w.sidecars {
		if sc.paused == nil {
			out = append(out, sc)
		}
	}
	return out
}

// pick is the sidecar that serves the next call: one of the active, as a
// load balancer in front of a fleet picks.
func (w *world) pick() *sidecar {
	a := w.active()
	return a[w.rng.IntN(len(a))]
}

// quiesce waits until the active sidecars have let go of the leases of
// the calls that ended (their release runs on a goroutine of its own) and
// the store's group commit has written what it was given, so that each
// event starts from durable records. engine.Close does no more than that
// wait: the engines go on.
func (w *world) quiesce() {
	for _, sc := range w.active() {
		sc.eng.Close()
	}
	w.db.Flush()
}

// drivenElsewhere reports, and traces, whether another sidecar holds a
// live lease of wf as sc's clock reads it. The engine would then poll for
// the lease, on the wall clock, until the call's context ends, which in a
// real fleet is the agent's request timing out (engine.ErrLeaseHeld): the
// harness answers that without waiting, since nothing else moves while
// it would.
func (w *world) drivenElsewhere(sc *sidecar, wf string) bool {
	if !w.fleet {
		return false
	}
	var l store.Lease
	err := w.db.View(func(tx *store.Tx) (err error) { l, err = tx.Lease(wf); return err })
	if err != nil || l.Parked() || l.Holder == sc.holder || !sc.clock.Now().Before(l.Expires) {
		return false
	}
	w.tracef("%s: %s is driven by %s (lease %d until +%s): the call waits and times out", sc.name, wf, l.Holder, l.Fence, l.Expires.Sub(begin))
	return true
}

// pause has a sidecar propose a refund and hold it up in the middle of
// its dispatch, with its lease taken and its write-ahead record made.
// Only a fleet has another sidecar to take the workflow over; the world
// keeps at least one sidecar active.
func (w *world) pause(ctx context.Context) error {
	if !w.fleet || len(w.active()) < 2 {
		return nil
	}
	wf, ok := w.pickWorkflow()
	if !ok {
		return nil
	}
	sc := w.pick()
	if w.drivenElsewhere(sc, wf.id) {
		return nil
	}
	order, paid := w.pickOrder(wf.rep)
	args := fmt.Appendf(nil, `{"order":%q,"amount":%d}`, order, w.refundAmount(paid))
	p := &paused{wf: wf.id, what: string(args), held: make(chan struct{}), resume: make(chan struct{}), done: make(chan pausedEnd, 1)}
	w.tracef("%s: propose %s %s %s, to be held up in its dispatch", sc.name, wf.id, tool.IssueRefund, args)
	w.net.hold = map[*sidecar]*paused{sc: p}
	go func() {
		s, err := sc.eng.Propose(ctx, person(wf.rep), wf.id, tool.IssueRefund, args)
		p.done <- pausedEnd{s, err}
	}()
	select {
	case <-p.held:
		sc.paused = p
		w.tracef("%s: paused with its request to the ledger written", sc.name)
		return nil
	case end := <-p.done:
		w.net.hold = nil
		w.tracef("%s: propose %s: %s %s (no effect to hold up)", sc.name, wf.id, errClass(end.err), stepLine(end.step))
		if end.err == nil {
			w.ack(end.step)
		}
		if errors.Is(end.err, engine.ErrCrashed) {
			return end.err
		}
		return w.fatal(ignorable(end.err))
	}
}

// unpause lets a paused sidecar go on, past its lease if the clock moved
// beyond it: its request goes out (with a fate of the network's) and its
// engine records the outcome, which the lease fencing number refuses
// when another sidecar took the workflow over meanwhile.
func (w *world) unpause(ctx context.Context) error {
	for _, sc := range w.sidecars {
		if sc.paused != nil && w.rng.IntN(2) == 0 {
			return w.resumePaused(sc)
		}
	}
	return nil
}

func (w *world) resumePaused(sc *sidecar) error {
	p := sc.paused
	w.tracef("%s: resumes its held call in %s", sc.name, p.wf)
	close(p.resume)
	end := <-p.done
	sc.paused = nil
	w.tracef("%s: propose %s %s: %s %s", sc.name, p.wf, p.what, errClass(end.err), stepLine(end.step))
	if end.err == nil {
		w.ack(end.step)
	}
	if errors.Is(end.err, engine.ErrCrashed) {
		w.crashed = sc
		return end.err
	}
	return nil
}

// sweep has an active sidecar of a fleet run its sweeper once: it takes
// over the workflows whose lease expired.
func (w *world) sweep(ctx context.Context) error {
	if !w.fleet {
		return nil
	}
	sc := w.pick()
	err := sc.eng.Sweep(ctx)
	w.tracef("%s: sweep: %s", sc.name, errClass(err))
	if errors.Is(err, engine.ErrCrashed) {
		w.crashed = sc
		return err
	}
	return nil
}
