package credential_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/countersign/countersign/executor/credential"
	"github.com/countersign/countersign/executor/store"
)

// Seal and Open round-trip under one label; another label, another key
// and a damaged value all fail alike, with ErrKeyEncryptionKey.
func TestSealOpensOnlyUnderItsLabelAndKey(t *testing.T) {
	kek := newKEK(t)
	secret := []byte("a bearer token")
	sealed, err := kek.Seal("leadpage session token abc", secret)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, secret) {
		t.Fatal("the sealed value holds the plaintext")
	}
	if got, err := kek.Open("leadpage session token abc", sealed); err != nil || !bytes.Equal(got, secret) {
		t.Fatalf("Open = %q, %v; want the plaintext", got, err)
	}
	again, err := kek.Seal("leadpage session token abc", secret)
	if err != nil || bytes.Equal(again, sealed) {
		t.Errorf("sealing twice gave the same bytes (%v): the nonce is not fresh", err)
	}
	damaged := bytes.Clone(sealed)
	damaged[len(damaged)-1] ^= 1
	for _, c := range []struct {
		name   string
		kek    *credential.KeyEncryptionKey
		label  string
		sealed []byte
	}{
		{"another label", kek, "leadpage session token abd", sealed},
		{"an empty label", kek, "", sealed},
		{"another key-encryption key", newKEK(t), "leadpage session token abc", sealed},
		{"a damaged value", kek, "leadpage session token abc", damaged},
		{"a truncated value", kek, "leadpage session token abc", sealed[:10]},
		{"nothing", kek, "leadpage session token abc", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got, err := c.kek.Open(c.label, c.sealed); !errors.Is(err, credential.ErrKeyEncryptionKey) || got != nil {
				t.Errorf("Open = %q, %v; want nothing and ErrKeyEncryptionKey", got, err)
			}
		})
	}
}

// A signing key sealed in the store does not open through Open under any
// label, and a value of Seal stored as a signing key does not open as one:
// the two kinds of sealed value cannot stand in for each other.
func TestSealedSigningKeysAndSealedValuesDoNotMix(t *testing.T) {
	eachFleet(t, func(t *testing.T, f fleet) {
		kek := newKEK(t)
		db := f.sidecar(t)
		openShared(t, db, kek)
		var key1 []byte
		if err := db.View(func(tx *store.Tx) (err error) {
			key1, err = tx.SealedCredentialKey(1)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		for _, label := range []string{"", "epoch-1", "credential signing key epoch-1", "countersign credential signing key epoch-1"} {
			if _, err := kek.Open(label, key1); !errors.Is(err, credential.ErrKeyEncryptionKey) {
				t.Errorf("Open(%q) of the sealed signing key: %v; want ErrKeyEncryptionKey", label, err)
			}
		}

		// Someone with write access to the database stores a value they
		// had sealed (a 32-byte seed of their choosing) as epoch 2's key.
		forged, err := kek.Seal("countersign credential signing key epoch-2", bytes.Repeat([]byte{7}, 32))
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Update(func(tx *store.Tx) error { return tx.PutCredentialKey(2, forged) }); err != nil {
			t.Fatal(err)
		}
		if _, err := credential.Open(credential.Options{Store: f.sidecar(t), KeyEncryptionKey: kek}); !errors.Is(err, credential.ErrKeyEncryptionKey) {
			t.Errorf("Open over a forged signing key: %v; want ErrKeyEncryptionKey", err)
		}
	})
}
