package credential

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"

	"github.com/countersign/countersign/executor/store"
	"github.com/lestrrat-go/jwx/v3/jwk"
)

// storeKeys is the keyring of a fleet: the current epoch and its private
// key, sealed under the key-encryption key, in the store the sidecars
// share (store.Tx.CredentialEpoch and friends). Every write is one store
// transaction, which may run more than once (store.DB.Update): each run
// reads the current epoch afresh and seals for the epoch it writes.
type storeKeys struct {
	db  *store.DB
	kek *KeyEncryptionKey
	log *slog.Logger
}

var _ keyring = storeKeys{}

// load reads the current key, or stores epoch 1 when the store has none.
// Sidecars starting together on an empty store all try; the store's
// serializable write lets one epoch 1 in and the others read it.
func (s storeKeys) load() (int, jwk.Key, error) {
	_, fresh, err := ed25519.GenerateKey(nil)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: generate Ed25519 key: %w", ErrKeyStore, err)
	}
	type found struct {
		epoch   int
		sealed  []byte
		created bool
	}
	var out found
	err = s.db.Update(func(tx *store.Tx) error {
		cur, err := tx.CredentialEpoch()
		if err != nil {
			return err
		}
		if cur > 0 {
			sealed, err := sealedKey(tx, cur)
			out = found{epoch: int(cur), sealed: sealed}
			return err
		}
		sealed, err := s.kek.seal(1, fresh.Seed())
		if err != nil {
			return err
		}
		out = found{epoch: 1, sealed: sealed, created: true}
		return tx.PutCredentialKey(1, sealed)
	})
	if err != nil {
		return 0, nil, fmt.Errorf("%w: load the fleet's signing key from the store: %w", ErrKeyStore, err)
	}
	key, err := s.unseal(out.epoch, out.sealed)
	if err != nil {
		return 0, nil, err
	}
	if out.created {
		s.log.Info("created the fleet's signing key in the store", "epoch", out.epoch, "kid", kidFor(out.epoch))
	}
	return out.epoch, key, nil
}

// raise stores a fresh key for the epoch after the store's current one,
// whatever the caller believes: another sidecar may have raised since.
// Two raises at once end at two distinct epochs.
func (s storeKeys) raise(int) (int, jwk.Key, error) {
	_, fresh, err := ed25519.GenerateKey(nil)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: generate Ed25519 key: %w", ErrKeyStore, err)
	}
	var next int
	err = s.db.Update(func(tx *store.Tx) error {
		cur, err := tx.CredentialEpoch()
		if err != nil {
			return err
		}
		next = int(cur) + 1
		sealed, err := s.kek.seal(next, fresh.Seed())
		if err != nil {
			return err
		}
		return tx.PutCredentialKey(uint64(next), sealed)
	})
	if err != nil {
		return 0, nil, fmt.Errorf("%w: raise the epoch in the store: %w", ErrKeyStore, err)
	}
	key, err := jwkFor(next, fresh)
	return next, key, err
}

// latest reads the store's current epoch: one key read, and a second
// with the sealed key only when the epoch moved.
func (s storeKeys) latest(have int) (int, jwk.Key, error) {
	var epoch int
	var sealed []byte
	err := s.db.View(func(tx *store.Tx) error {
		cur, err := tx.CredentialEpoch()
		if err != nil {
			return err
		}
		epoch, sealed = int(cur), nil
		if epoch == have {
			return nil
		}
		sealed, err = sealedKey(tx, cur)
		return err
	})
	switch {
	case err != nil:
		return 0, nil, fmt.Errorf("%w: read the fleet's current epoch: %w", ErrKeyStore, err)
	case epoch == have:
		return have, nil, nil
	case epoch == 0:
		return 0, nil, fmt.Errorf("%w: the store holds no signing key any more (was it emptied?): restart the sidecar to create one", ErrKeyStore)
	}
	key, err := s.unseal(epoch, sealed)
	return epoch, key, err
}

// sealedKey reads the sealed key of the current epoch. A current epoch
// without its key is a damaged keyring, not a missing record: the error
// does not match store.ErrNotFound.
func sealedKey(tx *store.Tx, epoch uint64) ([]byte, error) {
	sealed, err := tx.SealedCredentialKey(epoch)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w: the store's current epoch %d has no key (was the keyring edited by hand?): restore the database from a backup", ErrKeyStore, epoch)
	}
	return sealed, err
}

func (s storeKeys) unseal(epoch int, sealed []byte) (jwk.Key, error) {
	seed, err := s.kek.open(epoch, sealed)
	if err != nil {
		return nil, err
	}
	if len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("%w: the sealed key of epoch %d holds %d bytes, not an Ed25519 seed", ErrKeyStore, epoch, len(seed))
	}
	return jwkFor(epoch, ed25519.NewKeyFromSeed(seed))
}

var errNoKEK = errors.New("option KeyEncryptionKey is required with Store (serve --key-file FILE): the signing keys are sealed with it before they reach the database; " + keyFileAdvice)
