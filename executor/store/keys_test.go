package store_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/countersign/countersign/executor/store"
)

func TestCredentialKeysKeepOnlyTheCurrentEpochAndOnlyGoUp(t *testing.T) {
	eachBackend(t, func(t *testing.T, open opener) {
		db := open(t)
		read := func() (epoch uint64, one, two []byte) {
			t.Helper()
			if err := db.View(func(tx *store.Tx) (err error) {
				if epoch, err = tx.CredentialEpoch(); err != nil {
					return err
				}
				one, _ = tx.SealedCredentialKey(1)
				two, _ = tx.SealedCredentialKey(2)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			return epoch, one, two
		}
		if e, one, _ := read(); e != 0 || one != nil {
			t.Fatalf("empty store: epoch %d, key %x; want 0 and none", e, one)
		}
		put := func(epoch uint64, sealed string) error {
			return db.Update(func(tx *store.Tx) error { return tx.PutCredentialKey(epoch, []byte(sealed)) })
		}
		if err := put(1, "sealed-1"); err != nil {
			t.Fatal(err)
		}
		if err := put(2, "sealed-2"); err != nil {
			t.Fatal(err)
		}
		e, one, two := read()
		if e != 2 || one != nil || !bytes.Equal(two, []byte("sealed-2")) {
			t.Errorf("after epochs 1 and 2: epoch %d, key 1 %q, key 2 %q; want 2, none, sealed-2", e, one, two)
		}
		for _, epoch := range []uint64{1, 2} {
			if err := put(epoch, "again"); !errors.Is(err, store.ErrExists) {
				t.Errorf("PutCredentialKey(%d) at epoch 2 = %v, want ErrExists", epoch, err)
			}
		}
		if err := db.View(func(tx *store.Tx) error {
			_, err := tx.SealedCredentialKey(1)
			return err
		}); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("SealedCredentialKey of a revoked epoch = %v, want ErrNotFound", err)
		}
	})
}

func TestSharedOnlyOnPostgres(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			if got, want := b.place(t)(t).Shared(), b.name == "postgres"; got != want {
				t.Errorf("Shared() = %v, want %v", got, want)
			}
		})
	}
}
