package store

import (
	"fmt"
	"time"
)

// bLeases holds a Lease per workflow a sidecar is driving on a shared
// store, keyed by workflow id; a lease is deleted when its holder is done,
// so the bucket holds only the workflows in flight (and those of a holder
// that died, until they are taken over).
var bLeases = []byte("leases")

// A Lease says which sidecar drives a workflow, until when. Holder is the
// sidecar's id, random per process start; Token names one taking of the
// lease, so a holder releasing an old taking cannot delete a newer one.
type Lease struct {
	Workflow string    `json:"workflow"`
	Holder   string    `json:"holder"`
	Token    string    `json:"token"`
	Expires  time.Time `json:"expires"`
}

// Lease returns workflow wf's lease, or ErrNotFound.
func (t *Tx) Lease(wf string) (Lease, error) {
	var l Lease
	err := t.getJSON(bLeases, []byte(wf), &l)
	return l, err
}

// PutLease writes l over wf's lease.
func (t *Tx) PutLease(l Lease) error {
	return t.putJSON(bLeases, []byte(l.Workflow), l)
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
	return nil
}

// ExpiredLeases returns the leases that expired before now: the workflows
// of a holder that stopped renewing them.
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
