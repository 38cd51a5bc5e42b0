package store

import (
	"fmt"
	"time"
)

// bLeases holds a Lease per workflow a sidecar is driving on a shared
// store, keyed by workflow id; a lease is deleted when its holder is done,
// or parked (ParkLease) when a step of the workflow waits to be resolved,
// so the bucket holds only the workflows in flight, those waiting, and
// those of a holder that died, until they are taken over. Its sequence
// numbers the takings (NextFence).
var bLeases = []byte("leases")

// bFences holds, per workflow whose lease is held, the fencing number of
// the taking that holds it (8 bytes, big-endian): the one key a write of
// the workflow's steps checks (CheckFence), apart from the lease itself,
// whose expiry every renewal rewrites.
var bFences = []byte("lease_fences")

// A Lease says which sidecar drives a workflow, until when. Holder is the
// sidecar's id, random per process start; Token names one taking of the
// lease, so a holder releasing an old taking cannot delete a newer one.
// Fence is the taking's fencing number (NextFence): it grows at every
// taking, across the fleet, so a write checked against it (CheckFence)
// from a taking that has since been taken over is refused.
//
// A parked lease has no Holder: nobody drives the workflow, but one of its
// steps waits until Expires to be resolved (its tokens may still land
// until then), and the fleet's sweeper, which resumes the workflows of
// expired leases, resolves it then.
type Lease struct {
	Workflow string    `json:"workflow"`
	Holder   string    `json:"holder"`
	Token    string    `json:"token"`
	Fence    uint64    `json:"fence,omitempty"`
	Expires  time.Time `json:"expires"`
}

// Parked reports whether l is a parked lease: held by nobody, waiting.
func (l Lease) Parked() bool { return l.Holder == "" }

// Lease returns workflow wf's lease, or ErrNotFound.
func (t *Tx) Lease(wf string) (Lease, error) {
	var l Lease
	err := t.getJSON(bLeases, []byte(wf), &l)
	return l, err
}

// NextFence returns a fencing number for a new taking of a lease: larger
// than every one handed out before, on this store, whichever workflow
// they were for (so it grows per workflow too, even across a lease's
// deletion). One round trip on PostgreSQL.
func (t *Tx) NextFence() (uint64, error) {
	return t.bucket(bLeases).NextSequence()
}

// PutLease writes l over wf's lease, and l's fencing number as the one
// wf's step writes are checked against.
func (t *Tx) PutLease(l Lease) error {
	if err := t.putJSON(bLeases, []byte(l.Workflow), l); err != nil {
		return err
	}
	if l.Parked() {
		return t.bucket(bFences).Delete([]byte(l.Workflow))
	}
	return t.bucket(bFences).Put([]byte(l.Workflow), u64(l.Fence))
}

// ExtendLease writes l over wf's lease, its fencing number unchanged: a
// renewal leaves the fence row, and the writes checked against it, alone.
func (t *Tx) ExtendLease(l Lease) error { return t.putJSON(bLeases, []byte(l.Workflow), l) }

// CheckFence fails the transaction with ErrFenced unless the lease of
// workflow wf is held by the taking with fencing number fence: a later
// taking has another, and a lease deleted or parked since has none. On
// PostgreSQL the check rides with the transaction's next read or its
// commit: no round trip of its own.
func (t *Tx) CheckFence(wf string, fence uint64) error {
	return t.bucket(bFences).Expect([]byte(wf), u64(fence),
		fmt.Errorf("%w: workflow %s is no longer held under fencing number %d", ErrFenced, wf, fence))
}

// DeleteLease deletes wf's lease if it is still the taking token; a lease
// taken again since stays.
func (t *Tx) DeleteLease(wf, token string) error {
	l, err := t.Lease(wf)
	if err != nil || l.Token != token {
		return nil
	}
	if err := t.bucket(bLeases).Delete([]byte(wf)); err != nil {
		return fmt.Errorf("delete lease %s: %w", wf, err)
	}
	return t.bucket(bFences).Delete([]byte(wf))
}

// ParkLease releases wf's lease, if it is still the taking token, as a
// parked lease that expires at until: nobody drives the workflow, and the
// sweeper resumes it once until has passed.
func (t *Tx) ParkLease(wf, token string, until time.Time) error {
	l, err := t.Lease(wf)
	if err != nil || l.Token != token {
		return nil
	}
	return t.PutLease(Lease{Workflow: wf, Fence: l.Fence, Expires: until})
}

// ExpiredLeases returns the leases that expired before now: the workflows
// of a holder that stopped renewing them, and the parked ones whose wait
// is over.
func (t *Tx) ExpiredLeases(now time.Time) ([]Lease, error) {
	var out []Lease
	err := t.bucket(bLeases).ForEach(func(k, v []byte) error {
		var l Lease
		if err := decodeJSON(bLeases, k, v, &l); err != nil {
			return err
		}
		if !now.Before(l.Expires) {
			out = append(out, l)
		}
		return nil
	})
	return out, err
}
