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
	// every TTL/3 while it drives the workflow (a dispatch may outlast a
	// TTL); a holder killed leaves it to expire, and then Sweep in any
	// sidecar takes the workflow over.
	TTL time.Duration
}

// DefaultLeaseTTL is Leases.TTL when left zero.
const DefaultLeaseTTL = 5 * time.Second

// ErrLeaseHeld: another live sidecar drives the workflow and the request's
// context ended before it let go.
var ErrLeaseHeld = errors.New("workflow driven by another sidecar")

// NewHolder returns a random holder id.
func NewHolder() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// lock serializes the steps of workflow wf: in this process with its
// lock, and with Options.Leases across the sidecars of a shared store with
// its lease, which it waits for while another live sidecar holds it,
// until ctx ends (ErrLeaseHeld). The release it returns lets both go.
func (e *Engine) lock(ctx context.Context, wf string) (func(), error) {
	unlock := e.locks.lock(wf)
	if e.leases == nil {
		return unlock, nil
	}
	token, err := e.takeLease(ctx, wf)
	if err != nil {
		unlock()
		return nil, err
	}
	stop := e.renewLease(wf, token)
	return func() {
		stop()
		unlock()
		// The lease goes once the holder's last write is durable, so that
		// another sidecar taking the workflow reads it.
		e.releasing.Add(1)
		go func() {
			defer e.releasing.Done()
			e.locks.settle(wf)
			if err := e.db.Update(func(tx *store.Tx) error { return tx.DeleteLease(wf, token) }); err != nil {
				e.log.Warn("lease release failed; it will expire", "workflow", wf, "err", err)
			}
		}()
	}, nil
}

// Close waits until the leases of the steps that have ended are deleted,
// so that a sidecar shut down leaves none for the fleet to wait out. Call
// it once nothing drives a step any more, before the store is closed.
func (e *Engine) Close() {
	e.releasing.Wait()
}

// heldElsewhere returns wf's lease when another live sidecar holds it,
// and the zero Lease when it is free, expired or this sidecar's.
func (e *Engine) heldElsewhere(tx *store.Tx, wf string) (store.Lease, error) {
	if e.leases == nil {
		return store.Lease{}, nil
	}
	l, err := tx.Lease(wf)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return store.Lease{}, nil
	case err != nil:
		return store.Lease{}, err
	case l.Holder == e.leases.Holder || !e.clock.Now().Before(l.Expires):
		return store.Lease{}, nil
	}
	return l, nil
}

// takeLease takes wf's lease when it is free, expired or this sidecar's,
// and otherwise polls until it is, or ctx ends.
func (e *Engine) takeLease(ctx context.Context, wf string) (string, error) {
	token := NewHolder()
	poll := max(e.leases.TTL/10, 10*time.Millisecond)
	for {
		var held store.Lease
		err := e.db.Update(func(tx *store.Tx) error {
			var err error
			if held, err = e.heldElsewhere(tx, wf); err != nil || held.Holder != "" {
				return err
			}
			return tx.PutLease(store.Lease{Workflow: wf, Holder: e.leases.Holder, Token: token, Expires: e.clock.Now().Add(e.leases.TTL)})
		})
		if err != nil {
			return "", fmt.Errorf("take the lease of %s: %w", wf, err)
		}
		if held.Holder == "" {
			return token, nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("%w: %s is driven by sidecar %s (lease until %s): %w", ErrLeaseHeld, wf, held.Holder,
				held.Expires.Format(time.RFC3339Nano), ctx.Err())
		case <-time.After(poll):
		}
	}
}

// renewLease extends wf's lease every TTL/3 until the returned stop.
func (e *Engine) renewLease(wf, token string) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(e.leases.TTL / 3)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			err := e.db.Update(func(tx *store.Tx) error {
				l, err := tx.Lease(wf)
				if err != nil || l.Token != token {
					return fmt.Errorf("lease lost: %w", store.ErrNotFound)
				}
				l.Expires = e.clock.Now().Add(e.leases.TTL)
				return tx.PutLease(l)
			})
			if err != nil {
				e.log.Warn("lease renewal failed", "workflow", wf, "err", err)
			}
		}
	}()
	return func() { cancel(); <-done }
}

// Sweep resumes the workflows whose lease expired: their sidecar stopped
// renewing it (it was killed). Resuming takes each lease over and drives
// the workflow's open steps as the start-up resume does: started and
// unknown steps are resolved by their lookup rules, approved ones run.
// Without Options.Leases it does nothing.
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
		e.log.Info("taking over a workflow whose lease expired", "workflow", l.Workflow, "holder", l.Holder)
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
