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
	b := t.bucket(bAudit)
	if last, _ := b.Cursor().Last(); last != nil && bytes.Compare(id, last) <= 0 {
		return fmt.Errorf("append audit %q after %q: %w", id, last, ErrAuditOrder)
	}
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
