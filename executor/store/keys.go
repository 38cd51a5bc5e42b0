package store

import (
	"encoding/binary"
	"fmt"
)

// The credential keyring: the signing keys of the actor tokens when the
// store is shared by a fleet of sidecars (package credential decides when).
// The store keeps them opaque: each key is sealed by the credential
// package under a key-encryption key the database never sees.
//
//   - credential_keys: key "current", value the current epoch (8 bytes,
//     big-endian); key "epoch/" and the epoch (8 bytes, big-endian), value
//     that epoch's sealed private key. Only the current epoch's key is
//     kept: a revoked key has no further use.
var bCredentialKeys = []byte("credential_keys")

var (
	keyCurrentEpoch = []byte("current")
	keyEpochPrefix  = []byte("epoch/")
)

func sealedKeyKey(epoch uint64) []byte {
	return append(append([]byte{}, keyEpochPrefix...), u64(epoch)...)
}

// CredentialEpoch returns the fleet's current credential epoch, 0 when no
// key was ever stored.
func (t *Tx) CredentialEpoch() (uint64, error) {
	raw := t.bucket(bCredentialKeys).Get(keyCurrentEpoch)
	if raw == nil {
		return 0, nil
	}
	if len(raw) != 8 {
		return 0, fmt.Errorf("decode %s/%s: %d bytes, want 8", bCredentialKeys, keyCurrentEpoch, len(raw))
	}
	return binary.BigEndian.Uint64(raw), nil
}

// SealedCredentialKey returns the sealed private key of epoch, a copy
// valid after the transaction; ErrNotFound when the store has none.
func (t *Tx) SealedCredentialKey(epoch uint64) ([]byte, error) {
	raw := t.bucket(bCredentialKeys).Get(sealedKeyKey(epoch))
	if raw == nil {
		return nil, fmt.Errorf("sealed key of credential epoch %d: %w", epoch, ErrNotFound)
	}
	return append([]byte(nil), raw...), nil
}

// PutCredentialKey makes epoch the current epoch with its sealed key and
// deletes the keys of earlier epochs. epoch must be above the current one
// (ErrExists otherwise): epochs only go up, so a raise that lost a race
// reads the winner's epoch and goes above it.
func (t *Tx) PutCredentialKey(epoch uint64, sealed []byte) error {
	cur, err := t.CredentialEpoch()
	if err != nil {
		return err
	}
	if epoch <= cur {
		return fmt.Errorf("credential epoch %d (current %d): %w", epoch, cur, ErrExists)
	}
	b := t.bucket(bCredentialKeys)
	if err := b.Put(sealedKeyKey(epoch), sealed); err != nil {
		return err
	}
	if err := b.Put(keyCurrentEpoch, u64(epoch)); err != nil {
		return err
	}
	if cur == 0 {
		return nil
	}
	return b.Delete(sealedKeyKey(cur))
}
