package store

import (
	"encoding/json"
	"fmt"
)

// AppendBundle records one activation attempt and keeps the bundle bytes
// (by digest) so a restart can re-activate it. When rec is active, the
// previously active record becomes superseded in the same transaction.
func (t *Tx) AppendBundle(rec BundleRecord, blob []byte) (BundleRecord, error) {
	b := t.bucket(bBundles)
	if rec.Status == BundleActive {
		err := b.ForEach(func(k, v []byte) error {
			var old BundleRecord
			if err := json.Unmarshal(v, &old); err != nil {
				return fmt.Errorf("decode bundle record: %w", err)
			}
			if old.Status != BundleActive {
				return nil
			}
			old.Status = BundleSuperseded
			return t.putJSON(bBundles, k, old)
		})
		if err != nil {
			return BundleRecord{}, err
		}
	}
	seq, err := b.NextSequence()
	if err != nil {
		return BundleRecord{}, err
	}
	rec.Seq = seq
	if rec.Status == BundleActive {
		if err := t.bucket(bMeta).Put(metaActiveBundle, []byte(rec.Digest)); err != nil {
			return BundleRecord{}, err
		}
	}
	if rec.Failures == nil {
		rec.Failures = []BundleFailure{}
	}
	if len(blob) > 0 {
		if err := t.bucket(bBlobs).Put([]byte(rec.Digest), blob); err != nil {
			return BundleRecord{}, err
		}
	}
	return rec, t.putJSON(bBundles, u64(seq), rec)
}

// Bundles returns the activation history, oldest first.
func (t *Tx) Bundles() ([]BundleRecord, error) {
	var out []BundleRecord
	err := t.bucket(bBundles).ForEach(func(k, v []byte) error {
		var r BundleRecord
		if err := decodeJSON(bBundles, k, v, &r); err != nil {
			return err
		}
		out = append(out, r)
		return nil
	})
	return out, err
}

// metaActiveBundle, in the meta bucket, is the active bundle's digest:
// what ActiveDigest reads in one key.
var metaActiveBundle = []byte("active_bundle")

// ActiveDigest returns the active bundle's digest, or "" when no bundle
// was ever activated. It reads one key, so a decision can check in its own
// transaction that it decides with the fleet's active bundle; a store
// whose last activation predates that key is read through its history.
func (t *Tx) ActiveDigest() string {
	if d := t.bucket(bMeta).Get(metaActiveBundle); d != nil {
		return string(d)
	}
	all, err := t.Bundles()
	if err != nil {
		return ""
	}
	for i := len(all) - 1; i >= 0; i-- {
		if all[i].Status == BundleActive {
			return all[i].Digest
		}
	}
	return ""
}

// ActiveBundle returns the active record and its bundle bytes, or ErrNotFound.
func (t *Tx) ActiveBundle() (BundleRecord, []byte, error) {
	all, err := t.Bundles()
	if err != nil {
		return BundleRecord{}, nil, err
	}
	for i := len(all) - 1; i >= 0; i-- {
		if all[i].Status == BundleActive {
			blob := t.bucket(bBlobs).Get([]byte(all[i].Digest))
			if blob == nil {
				return BundleRecord{}, nil, fmt.Errorf("active bundle %s: bytes %w", all[i].Digest, ErrNotFound)
			}
			return all[i], append([]byte(nil), blob...), nil
		}
	}
	return BundleRecord{}, nil, ErrNotFound
}

// ApproveAwaiting marks the last record of digest that awaits a second
// operator as approved, and returns it; ErrNotFound when none awaits.
func (t *Tx) ApproveAwaiting(digest string) (BundleRecord, error) {
	rec, err := t.Awaiting(digest)
	if err != nil {
		return rec, err
	}
	rec.Status = BundleApproved
	return rec, t.putJSON(bBundles, u64(rec.Seq), rec)
}

// Awaiting returns the last record of digest if it awaits a second
// operator, and ErrNotFound otherwise.
func (t *Tx) Awaiting(digest string) (BundleRecord, error) {
	c := t.bucket(bBundles).Cursor()
	for k, v := c.Last(); k != nil; k, v = c.Prev() {
		var r BundleRecord
		if err := json.Unmarshal(v, &r); err != nil {
			return r, fmt.Errorf("decode bundle record: %w", err)
		}
		if r.Digest == digest {
			if r.Status == BundleAwaiting {
				return r, nil
			}
			break
		}
	}
	return BundleRecord{}, fmt.Errorf("bundle %s awaiting a second operator: %w", digest, ErrNotFound)
}

// LastBundle returns the last record of digest, whatever its status, or
// ErrNotFound when the history has none.
func (t *Tx) LastBundle(digest string) (BundleRecord, error) {
	c := t.bucket(bBundles).Cursor()
	for k, v := c.Last(); k != nil; k, v = c.Prev() {
		var r BundleRecord
		if err := decodeJSON(bBundles, k, v, &r); err != nil {
			return r, err
		}
		if r.Digest == digest {
			return r, nil
		}
	}
	return BundleRecord{}, fmt.Errorf("bundle %s: %w", digest, ErrNotFound)
}

// BundleBytes returns the bytes of a bundle the history holds, by digest.
func (t *Tx) BundleBytes(digest string) ([]byte, error) {
	blob := t.bucket(bBlobs).Get([]byte(digest))
	if blob == nil {
		return nil, fmt.Errorf("bundle %s: %w", digest, ErrNotFound)
	}
	return append([]byte(nil), blob...), nil
}
