package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// bAuditCheckpoints holds the audit log's signed checkpoints: key = the
// position a checkpoint covers (the number of records from the start,
// 8 bytes big-endian, so key order is chain order), value = the
// checkpoint as the audit package encodes it. Like the log, it is
// append-only: a checkpoint is never written over.
var bAuditCheckpoints = []byte("audit_checkpoints")

// bAuditKeys holds the public keys that signed checkpoints: key = the key
// id, value = the public key as the audit package encodes it (a JWK). A
// fleet's sidecars each register theirs, so any of them publishes all.
var bAuditKeys = []byte("audit_keys")

// AppendAuditCheckpoint adds the checkpoint value at position, which must
// be above the last checkpoint's (ErrAuditOrder otherwise).
func (t *Tx) AppendAuditCheckpoint(position uint64, value []byte) error {
	b := t.bucket(bAuditCheckpoints)
	key := u64(position)
	if last, _ := b.Cursor().Last(); last != nil && bytes.Compare(key, last) <= 0 {
		return fmt.Errorf("append audit checkpoint at %d after %d: %w", position, binary.BigEndian.Uint64(last), ErrAuditOrder)
	}
	if err := b.Put(key, bytes.Clone(value)); err != nil {
		return fmt.Errorf("append audit checkpoint at %d: %w", position, err)
	}
	return nil
}

// LastAuditCheckpoint returns a copy of the last checkpoint, nil when
// there is none.
func (t *Tx) LastAuditCheckpoint() []byte {
	_, v := t.bucket(bAuditCheckpoints).Cursor().Last()
	return bytes.Clone(v)
}

// EachAuditCheckpoint calls fn for every checkpoint after position after
// (0: from the first), in position order, stopping at fn's first error.
// value is valid only during the call.
func (t *Tx) EachAuditCheckpoint(after uint64, fn func(value []byte) error) error {
	return walk(t.bucket(bAuditCheckpoints), u64(after+1), nil, func(_, v []byte) error { return fn(v) })
}

// PutAuditKey records the public key kid (value: its JWK). Writing the
// same key again is harmless.
func (t *Tx) PutAuditKey(kid string, value []byte) error {
	if err := t.bucket(bAuditKeys).Put([]byte(kid), bytes.Clone(value)); err != nil {
		return fmt.Errorf("put audit key %s: %w", kid, err)
	}
	return nil
}

// EachAuditKey calls fn for every public key, in key id order.
func (t *Tx) EachAuditKey(fn func(value []byte) error) error {
	return walk(t.bucket(bAuditKeys), []byte{}, nil, func(_, v []byte) error { return fn(v) })
}
