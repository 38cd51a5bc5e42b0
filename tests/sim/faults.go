package sim

import (
	"context"
	"errors"
)

// errStoreDown is what a write of the store returns while it is down.
var errStoreDown = errors.New("sim: the store fails every write (disk full, PostgreSQL unreachable)")

// storePoints are where the store goes down: at the start of the next
// call ("call"), or at one of the engine's failpoints, so that the write
// that fails is the one after it: the write-ahead record and deadline
// (before_dispatch), the outcome of an effect that took place
// (after_dispatch), the release of the lease (after_record), the opening
// of a workflow with its first step (after_open, inside its transaction).
var storePoints = []string{"call", "after_open", "before_dispatch", "after_dispatch", "after_record"}

// failWrite is the store's Options.FailWrite.
func (w *world) failWrite() error {
	if w.storeDown {
		return errStoreDown
	}
	return nil
}

// armStore has the store fail every write from a point of the next call
// to the end of its event.
func (w *world) armStore(context.Context) error {
	w.downAt = storePoints[w.rng.IntN(len(storePoints))]
	w.tracef("the store will fail every write from %s on, to the end of the next event", w.downAt)
	return nil
}

// raiseEpoch has an operator raise the credential epoch: every token
// minted before no longer verifies, including those of requests the
// network holds and of a paused sidecar's call (InvEpoch).
func (w *world) raiseEpoch(ctx context.Context) error {
	epoch, err := w.auth.Raise(ctx)
	if err != nil {
		return w.fatal(err)
	}
	w.tracef("the credential epoch is raised to %d", epoch)
	return nil
}
