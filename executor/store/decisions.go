package store

import (
	"bytes"
	"encoding/binary"
	"time"
)

// AppendDecision adds d to the decision log, assigning its sequence number.
// Key: the sequence number; an index by workflow points at it.
func (t *Tx) AppendDecision(d Decision) (Decision, error) {
	seq, err := t.bucket(bDecisions).NextSequence()
	if err != nil {
		return Decision{}, err
	}
	d.Seq = seq
	if err := t.putJSON(bDecisions, u64(seq), d); err != nil {
		return Decision{}, err
	}
	return d, t.bucket(bDecisionsWF).Put(append(append([]byte(d.Workflow), 0), u64(seq)...), nil)
}

// Decisions returns the decision log, or the part of it for one workflow
// when wf is not empty, oldest first.
func (t *Tx) Decisions(wf string) ([]Decision, error) {
	var out []Decision
	add := func(seq []byte) error {
		var d Decision
		if err := t.getJSON(bDecisions, seq, &d); err != nil {
			return err
		}
		out = append(out, d)
		return nil
	}
	if wf == "" {
		err := t.bucket(bDecisions).ForEach(func(k, _ []byte) error { return add(k) })
		return out, err
	}
	prefix := append([]byte(wf), 0)
	c := t.bucket(bDecisionsWF).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		if len(k) != len(prefix)+8 {
			continue // a longer workflow id that shares the prefix cannot: ids hold no NUL
		}
		if err := add(u64(binary.BigEndian.Uint64(k[len(prefix):]))); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// DecisionsSince calls fn for each decision made at or after since, newest
// first. The log is in time order, so it reads only that tail.
func (t *Tx) DecisionsSince(since time.Time, fn func(Decision) error) error {
	c := t.bucket(bDecisions).Cursor()
	for k, _ := c.Last(); k != nil; k, _ = c.Prev() {
		var d Decision
		if err := t.getJSON(bDecisions, k, &d); err != nil {
			return err
		}
		if d.At.Before(since) {
			return nil
		}
		if err := fn(d); err != nil {
			return err
		}
	}
	return nil
}
