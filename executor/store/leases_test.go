package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/countersign/countersign/executor/store"
)

// A lease is deleted only by the taking that wrote it, and only expired
// leases are listed for takeover.
func TestLeases(t *testing.T) {
	eachBackend(t, func(t *testing.T, open opener) {
		db := open(t)
		mustUpdate(t, db, func(tx *store.Tx) error {
			if err := tx.PutLease(store.Lease{Workflow: "W1", Holder: "a", Token: "t1", Expires: t0}); err != nil {
				return err
			}
			return tx.PutLease(store.Lease{Workflow: "W2", Holder: "b", Token: "t2", Expires: t0.Add(time.Minute)})
		})
		db.View(func(tx *store.Tx) error {
			got, err := tx.ExpiredLeases(t0.Add(time.Second))
			if err != nil || len(got) != 1 || got[0].Workflow != "W1" || got[0].Holder != "a" {
				t.Errorf("expired = %+v %v, want W1 alone", got, err)
			}
			return nil
		})
		mustUpdate(t, db, func(tx *store.Tx) error {
			if err := tx.PutLease(store.Lease{Workflow: "W1", Holder: "a", Token: "t3", Expires: t0}); err != nil {
				return err
			}
			if err := tx.DeleteLease("W1", "t1"); err != nil { // an old taking's release
				return err
			}
			return tx.DeleteLease("W2", "t2")
		})
		db.View(func(tx *store.Tx) error {
			if l, err := tx.Lease("W1"); err != nil || l.Token != "t3" {
				t.Errorf("W1 = %+v %v, want the newer taking t3 kept", l, err)
			}
			if _, err := tx.Lease("W2"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("W2 after its release: %v, want ErrNotFound", err)
			}
			return nil
		})
	})
}
