package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign/executor/store"
)

// Leases make one sidecar at a time drive a workflow on a store several
// sidecars share (Options.Leases). The zero TTL is DefaultLeaseTTL.
type Leases struct {
	// Holder names this sidecar in the leases it takes: random per
	// process start (NewHolder), so a restarted sidecar does not mistake
	// its dead predecessor's leases for its own.
	Holder string
	// TTL is how long a lease lasts unless renewed. A holder renews it
	// every RenewEvery while it drives the workflow (a dispatch may
	// outlast a TTL); a holder killed or paused leaves it to expire, and
	// then Sweep in any sidecar takes the workflow over.
	TTL time.Duration
	// RenewEvery is how often a holder renews; zero is TTL/3. Only tests
	// set it, to hold up a holder's renewals as a paused process would.
	RenewEvery time.Duration
}

// DefaultLeaseTTL is Leases.TTL when left zero.
const DefaultLeaseTTL = 5 * time.Second

// ErrLeaseHeld: another live sidecar drives the workflow and the request's
// context ended before it let go.
var ErrLeaseHeld = errors.New("workflow driven by another sidecar")

// errLeaseLost: a renewal found the lease taken by another taking.
var errLeaseLost = errors.New("lease lost")

// NewHolder returns a random holder id.
func NewHolder() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Holder is this sidecar's id in the leases it takes on a shared store;
// "" without Options.Leases.
func (e *Engine) Holder() string {
	if e.leases == nil {
		return ""
	}
	return e.leases.Holder
}

// taking is this sidecar's hold of one workflow's lease: the lease's
// token, its fencing number (which every write of the workflow's steps
// checks, putStep), and until when the lease was parked when it was taken
// (zero: it was not).
type taking struct {
	token  string
	fence  uint64
	parked time.Time
	// tookOver: the lease was another sidecar's, expired.
	tookOver bool
}

// lock serializes the steps of workflow wf: in this process with its
// lock, and with Options.Leases across the sidecars of a shared store with
// its lease, which it waits for while another live sidecar holds it,
// until ctx ends (ErrLeaseHeld). The release it returns lets both go: it
// deletes the lease, or parks it when a step of the workflow waits to be
// resolved (awaitResolve), so that the fleet's sweeper comes back then.
func (e *Engine) lock(ctx context.Context, wf string) (func(), error) {
	return e.lockWith(ctx, wf, underLock{})
}

// underLock is what a caller reads as it takes a workflow's lock: reads,
// asked for once the workflow's lock in this process is held and read
// ahead with the lease, and fn, run on them once the workflow is held.
// Both may run more than once, as an Update's function may.
type underLock struct {
	reads func() []store.Read
	fn    func(*store.Tx) error
}

// ahead is what u reads ahead.
func (u underLock) ahead() []store.Read {
	if u.reads == nil {
		return nil
	}
	return u.reads()
}

// lockWith is lock, running also.fn once the workflow is held: in the
// transaction that takes the lease, whose snapshot shows every write of
// the holders before it (they released the lease, or parked it, once
// their writes were durable), so the lease and the caller's reads cost
// two round trips together on PostgreSQL. A lease taken over from a
// sidecar that stopped renewing it is the exception: a late write of
// that sidecar may commit after the snapshot and before the takeover's
// fence write (it only locked the fence row), so fn then reads in a
// transaction of its own, begun after the takeover committed. Without
// leases fn runs in a read transaction. An error of fn is lockWith's,
// with nothing held.
func (e *Engine) lockWith(ctx context.Context, wf string, also underLock) (func(), error) {
	unlock := e.locks.lock(wf)
	apart := func() error {
		if also.fn == nil {
			return nil
		}
		return e.db.View(func(tx *store.Tx) error { tx.Prefetch(also.ahead()...); return also.fn(tx) })
	}
	if e.leases == nil {
		if err := apart(); err != nil {
			unlock()
			return nil, err
		}
		return unlock, nil
	}
	tk, err := e.takeLease(ctx, wf, also)
	if err == nil && tk.tookOver {
		if err = apart(); err != nil {
			e.releaseLease(wf, tk, time.Time{}) // nothing was done under it
		}
	}
	if err != nil {
		unlock()
		return nil, err
	}
	e.holdLease(wf, tk)
	stop := e.renewLease(wf, tk)
	return func() {
		stop()
		park := e.parkUntil(wf, tk)
		unlock()
		// The lease goes once the holder's last write is durable, so that
		// another sidecar taking the workflow reads it.
		e.releasing.Add(1)
		go func() {
			defer e.releasing.Done()
			e.locks.settle(wf)
			e.releaseLease(wf, tk, park)
			e.letGo(wf, tk)
		}()
	}, nil
}

// releaseLease deletes the lease tk took of wf, or parks it until park
// (non-zero); a lease taken again since stays.
func (e *Engine) releaseLease(wf string, tk taking, park time.Time) {
	err := e.db.UpdateRows(func(tx *store.Tx) error {
		if !park.IsZero() {
			return tx.ParkLease(wf, tk.token, park)
		}
		return tx.DeleteLease(wf, tk.token)
	})
	if err != nil {
		e.log.Warn("lease release failed; it will expire", "workflow", wf, "err", err)
	}
}

// holdLease records that this sidecar holds wf's lease under tk, and forgets
// what an earlier taking noted as waiting.
func (e *Engine) holdLease(wf string, tk taking) {
	e.heldMu.Lock()
	defer e.heldMu.Unlock()
	e.held[wf] = tk
	delete(e.awaiting, wf)
}

// letGo forgets the taking tk of wf, unless wf was taken again since.
func (e *Engine) letGo(wf string, tk taking) {
	e.heldMu.Lock()
	defer e.heldMu.Unlock()
	if e.held[wf].token == tk.token {
		delete(e.held, wf)
	}
}

// fenceOf is the fencing number under which this sidecar holds wf's
// lease; false when it holds none (no Options.Leases).
func (e *Engine) fenceOf(wf string) (uint64, bool) {
	e.heldMu.Lock()
	defer e.heldMu.Unlock()
	tk, ok := e.held[wf]
	return tk.fence, ok
}

// parkUntil is when the lease of wf, taken as tk, is to expire once it is
// let go: the earliest time a step left waiting may be resolved, or the
// time it was parked until when tk took it, if that is still to come (a
// step this taking did not look at still waits); zero: delete it.
func (e *Engine) parkUntil(wf string, tk taking) time.Time {
	e.heldMu.Lock()
	at := e.awaiting[wf]
	delete(e.awaiting, wf)
	e.heldMu.Unlock()
	if tk.parked.After(e.clock.Now()) && (at.IsZero() || tk.parked.Before(at)) {
		at = tk.parked
	}
	return at
}

// checkFence fails tx with ErrFenced unless this sidecar still holds wf's
// lease under the fencing number it took it with: a sidecar that was
// paused past its lease cannot overwrite what the one that took the
// workflow over recorded. Without Options.Leases, or with the LeaseFencing
// control removed, it checks nothing.
func (e *Engine) checkFence(tx *store.Tx, wf string) error {
	if e.leases == nil || !e.controls.LeaseFencing {
		return nil
	}
	fence, ok := e.fenceOf(wf)
	if !ok {
		return nil
	}
	return tx.CheckFence(wf, fence)
}

// fencedOff logs, once per write refused, that another sidecar took wf
// over while this one drove it, and returns err: the caller stops driving
// the workflow, leaving the other sidecar's records as they are.
func (e *Engine) fencedOff(wf string, err error) error {
	if errors.Is(err, ErrFenced) {
		fence, _ := e.fenceOf(wf)
		e.log.Warn("another sidecar took this workflow over: its lease expired while this one was held up; "+
			"the write was refused and this sidecar stops driving the workflow", "workflow", wf, "fence", fence, "err", err)
	}
	return err
}

// Close waits until the leases of the steps that have ended are deleted,
// so that a sidecar shut down leaves none for the fleet to wait out. Call
// it once nothing drives a step any more, before the store is closed.
func (e *Engine) Close() {
	e.releasing.Wait()
}

// heldElsewhere returns wf's lease when another live sidecar holds it,
// and the zero Lease when it is free, expired, parked or this sidecar's.
func (e *Engine) heldElsewhere(tx *store.Tx, wf string) (store.Lease, error) {
	if e.leases == nil {
		return store.Lease{}, nil
	}
	l, err := currentLease(tx, wf)
	if err != nil || !e.liveElsewhere(l) {
		return store.Lease{}, err
	}
	return l, nil
}

// currentLease is wf's lease, or the zero Lease when it has none.
func currentLease(tx *store.Tx, wf string) (store.Lease, error) {
	l, err := tx.Lease(wf)
	if errors.Is(err, store.ErrNotFound) {
		return store.Lease{}, nil
	}
	return l, err
}

// liveElsewhere reports whether l is held by another sidecar and has not
// expired.
func (e *Engine) liveElsewhere(l store.Lease) bool {
	return l.Workflow != "" && !l.Parked() && l.Holder != e.leases.Holder && e.clock.Now().Before(l.Expires)
}

// takeLease takes wf's lease when it is free, expired, parked or this
// sidecar's, under a new fencing number, and otherwise polls until it is,
// or ctx ends. On PostgreSQL it costs two round trips: the lease read
// with a fencing number drawn, and the commit with the writes.
func (e *Engine) takeLease(ctx context.Context, wf string, also underLock) (taking, error) {
	token := NewHolder()
	poll := max(e.leases.TTL/10, 10*time.Millisecond)
	for {
		var held store.Lease
		var tk taking
		var alsoErr error
		err := e.db.UpdateRows(func(tx *store.Tx) error {
			tk, held, alsoErr = taking{token: token}, store.Lease{}, nil
			tx.Prefetch(append([]store.Read{store.ReadLease(wf), store.ReadNumbers(store.FenceNumbers, 1)}, also.ahead()...)...)
			cur, err := currentLease(tx, wf)
			switch {
			case err != nil:
				return err
			case e.liveElsewhere(cur):
				held = cur
				return nil
			case cur.Parked():
				tk.parked = cur.Expires
			case cur.Holder != "" && cur.Holder != e.leases.Holder:
				tk.tookOver = true // expired: see lockWith
			}
			if tk.fence, err = tx.NextFence(); err != nil {
				return err
			}
			if err := tx.PutLease(store.Lease{Workflow: wf, Holder: e.leases.Holder, Token: token, Fence: tk.fence, Expires: e.clock.Now().Add(e.leases.TTL)}); err != nil {
				return err
			}
			if also.fn != nil && !tk.tookOver {
				alsoErr = also.fn(tx)
			}
			return alsoErr
		})
		if alsoErr != nil && errors.Is(err, alsoErr) {
			return taking{}, alsoErr // the caller's: nothing is held
		}
		if err != nil {
			return taking{}, fmt.Errorf("take the lease of %s: %w", wf, err)
		}
		if held.Holder == "" {
			return tk, nil
		}
		select {
		case <-ctx.Done():
			return taking{}, fmt.Errorf("%w: %s is driven by sidecar %s (lease until %s): %w", ErrLeaseHeld, wf, held.Holder,
				held.Expires.Format(time.RFC3339Nano), ctx.Err())
		case <-time.After(poll):
		}
	}
}

// renewLease extends wf's lease every Leases.RenewEvery (TTL/3) until the
// returned stop, or until it finds the lease taken over: it then logs it
// once and stops.
func (e *Engine) renewLease(wf string, tk taking) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(e.leases.RenewEvery)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			err := e.db.UpdateRows(func(tx *store.Tx) error {
				l, err := tx.Lease(wf)
				if err != nil || l.Token != tk.token {
					return errLeaseLost
				}
				l.Expires = e.clock.Now().Add(e.leases.TTL)
				return tx.ExtendLease(l)
			})
			if errors.Is(err, errLeaseLost) {
				e.log.Warn("lease lost: another sidecar took this workflow over; its writes from here on are refused",
					"workflow", wf, "fence", tk.fence)
				return
			}
			if err != nil {
				e.log.Warn("lease renewal failed", "workflow", wf, "err", err)
			}
		}
	}()
	return func() { cancel(); <-done }
}

// Sweep resumes the workflows whose lease expired: their sidecar stopped
// renewing it (it was killed or paused), or it was parked until a step's
// tokens expire. Resuming takes each lease over and drives the
// workflow's open steps as the start-up resume does: started and unknown
// steps are resolved by their lookup rules, approved ones run. Without
// Options.Leases it does nothing.
func (e *Engine) Sweep(ctx context.Context) error {
	if e.leases == nil {
		return nil
	}
	var expired []store.Lease
	if err := e.db.View(func(tx *store.Tx) (err error) {
		expired, err = tx.ExpiredLeases(e.clock.Now())
		return err
	}); err != nil {
		return err
	}
	var errs []error
	for _, l := range expired {
		if l.Parked() {
			e.log.Info("resolving a workflow whose steps' tokens have expired", "workflow", l.Workflow)
		} else {
			e.log.Info("taking over a workflow whose lease expired", "workflow", l.Workflow, "holder", l.Holder, "fence", l.Fence)
		}
		if err := e.resume(ctx, l.Workflow, false, nil); err != nil {
			errs = append(errs, fmt.Errorf("resume %s: %w", l.Workflow, err))
		}
	}
	return errors.Join(errs...)
}

// SweepEvery runs Sweep every period until ctx ends, logging what fails.
func (e *Engine) SweepEvery(ctx context.Context, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if err := e.Sweep(ctx); err != nil && ctx.Err() == nil {
			e.log.Warn("sweep incomplete", "err", err)
		}
	}
}
