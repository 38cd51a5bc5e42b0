package store

import (
	"bytes"
	"errors"
	"fmt"
)

// bAudit holds the audit log: key = the record id (a ULID string, so byte
// order is time order), value = the record as the audit package encodes it.
// It lives in the same file as the state so that a record commits in the
// same transaction as the change it records: a crash loses both or neither.
var bAudit = []byte("audit")

// ErrAuditOrder: an audit id that does not sort after the last one. The log
// is append-only; nothing is inserted before, or written over, a record that
// is already there.
var ErrAuditOrder = errors.New("audit id does not sort after the last record")

// AppendAudit adds one audit record at id. It refuses an empty id and an id
// that is not strictly greater (bytewise) than the last id in the log, so a
// record can neither be overwritten nor slipped in between two others through
// the store. The store does not look inside value: the chaining and its
// verification belong to the audit package.
func (t *Tx) AppendAudit(id, value []byte) error {
	if len(id) == 0 {
		return fmt.Errorf("append audit: empty id: %w", ErrAuditOrder)
	}
	last, _ := t.bucket(bAudit).Cursor().Last()
	return t.AppendAuditAfter(last, id, value)
}

// AppendAuditAfter is AppendAudit for a caller that knows the log's last
// id in this transaction (nil: the log is empty), having read or appended
// it: the order is checked against last without reading the log again,
// which on PostgreSQL is a round trip per record a sequencer chains.
func (t *Tx) AppendAuditAfter(last, id, value []byte) error {
	if len(id) == 0 {
		return fmt.Errorf("append audit: empty id: %w", ErrAuditOrder)
	}
	if last != nil && bytes.Compare(id, last) <= 0 {
		return fmt.Errorf("append audit %q after %q: %w", id, last, ErrAuditOrder)
	}
	b := t.bucket(bAudit)
	// bbolt keeps the slices until commit: hand it copies the caller cannot
	// change underneath.
	if err := b.Put(bytes.Clone(id), bytes.Clone(value)); err != nil {
		return fmt.Errorf("append audit %q: %w", id, err)
	}
	return nil
}

// LastAudit returns copies of the last record's id and value, or nil, nil
// when the log is empty.
func (t *Tx) LastAudit() (id, value []byte) {
	k, v := t.bucket(bAudit).Cursor().Last()
	if k == nil {
		return nil, nil
	}
	return bytes.Clone(k), bytes.Clone(v)
}

// EachAudit calls fn for every record in id order and stops at the first
// error fn returns, returning it unchanged (a caller may stop early with a
// sentinel of its own). id and value are valid only during the call: copy
// them to keep them.
func (t *Tx) EachAudit(fn func(id, value []byte) error) error {
	return t.EachAuditAfter(nil, fn)
}

// EachAuditAfter is EachAudit starting after the record at id (exclusive),
// or at the first record when id is empty. Pagination reads one page with a
// single cursor seek instead of walking the log from its start.
func (t *Tx) EachAuditAfter(after []byte, fn func(id, value []byte) error) error {
	return walk(t.bucket(bAudit), after, nil, func(k, v []byte) error {
		if bytes.Equal(k, after) {
			return nil
		}
		return fn(k, v)
	})
}

// bAuditPending holds the audit records written on a shared store and not
// yet sequenced: key = a number from the bucket's sequence (8 bytes,
// big-endian), value = the record without its place in the chain. A
// writer on a fleet cannot extend the chain inside its own transaction
// without every writer reading and writing its head, so it leaves the
// record here, in the transaction that makes the change, and the
// sequencer (audit.Log.Sequence) moves records into the chain in batches.
var bAuditPending = []byte("audit_pending")

// NextPendingAudit numbers a record to be sequenced.
func (t *Tx) NextPendingAudit() (uint64, error) {
	n, err := t.bucket(bAuditPending).NextSequence()
	if err != nil {
		return 0, fmt.Errorf("number a pending audit record: %w", err)
	}
	return n, nil
}

// AppendPendingAudit adds a record to be sequenced under its number n
// (NextPendingAudit).
func (t *Tx) AppendPendingAudit(n uint64, value []byte) error {
	return t.bucket(bAuditPending).Put(u64(n), bytes.Clone(value))
}

// EachPendingAudit calls fn for up to limit pending records in the order
// of their numbers (limit <= 0: all), stopping at fn's first error.
func (t *Tx) EachPendingAudit(limit int, fn func(key, value []byte) error) error {
	n := 0
	errEnough := errors.New("enough")
	err := walk(t.bucket(bAuditPending), []byte{}, nil, func(k, v []byte) error {
		if limit > 0 && n == limit {
			return errEnough
		}
		n++
		return fn(k, v)
	})
	if errors.Is(err, errEnough) {
		return nil
	}
	return err
}

// DeletePendingAudit removes the pending record at key, once sequenced.
func (t *Tx) DeletePendingAudit(key []byte) error {
	return t.bucket(bAuditPending).Delete(key)
}
