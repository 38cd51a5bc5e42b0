package store

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
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

// DecisionFilter selects decisions from the log. The zero value selects
// the whole log.
type DecisionFilter struct {
	// Workflow, when set, selects that workflow's decisions only.
	Workflow string
	// Since and Until bound the time of a decision: at or after Since and
	// before Until. Zero leaves that side open.
	Since, Until time.Time
	// After skips every decision up to and including this sequence number:
	// a DecisionPage's Next, to read the page after it.
	After uint64
}

// EachDecision calls fn with every decision f selects, in sequence order
// (oldest first), and stops at the first error fn returns, returning it
// unchanged (a caller may stop early with a sentinel of its own).
//
// It seeks instead of scanning the log from its start: to the first
// decision after f.After, to the first made at or after f.Since, and for a
// workflow along that workflow's index; it stops at the first decision
// made at or after f.Until.
//
// Since and Until are found by the order of the log, which is time order
// up to a few milliseconds: a decision is timed when the policy is asked
// and numbered when its transaction commits, so decisions made concurrently
// may commit in another order than they were timed. One timed that close
// to Since or Until may therefore be left out although its time is inside
// the bounds. Every decision passed to fn is inside them.
func (t *Tx) EachDecision(f DecisionFilter, fn func(Decision) error) error {
	if f.After == math.MaxUint64 {
		return nil // nothing follows, and After+1 would wrap to the start
	}
	start, err := t.firstDecisionAt(f.Since)
	if err != nil {
		return err
	}
	start = max(start, f.After+1)
	// visit reads one decision (raw, or from the log when raw is nil) and
	// reports whether the walk is past Until.
	visit := func(seq, raw []byte) (past bool, err error) {
		var d Decision
		if raw == nil {
			err = t.getJSON(bDecisions, seq, &d)
		} else {
			err = decodeJSON(bDecisions, seq, raw, &d)
		}
		if err != nil {
			return false, err
		}
		if !f.Until.IsZero() && !d.At.Before(f.Until) {
			return true, nil
		}
		if d.At.Before(f.Since) {
			return false, nil
		}
		return false, fn(d)
	}
	if f.Workflow == "" {
		c := t.bucket(bDecisions).Cursor()
		for k, v := c.Seek(u64(start)); k != nil; k, v = c.Next() {
			if past, err := visit(k, v); past || err != nil {
				return err
			}
		}
		return nil
	}
	prefix := append([]byte(f.Workflow), 0)
	err = walk(t.bucket(bDecisionsWF), slices.Concat(prefix, u64(start)), prefixEnd(prefix), func(k, _ []byte) error {
		if len(k) != len(prefix)+8 {
			return nil // a longer workflow id that shares the prefix cannot: ids hold no NUL
		}
		past, err := visit(k[len(prefix):], nil)
		if past {
			return errPastUntil
		}
		return err
	})
	if errors.Is(err, errPastUntil) {
		return nil
	}
	return err
}

// errPastUntil stops a walk of EachDecision at its Until.
var errPastUntil = errors.New("past until")

// firstDecisionAt returns the sequence number from which the decisions
// made at or after at begin (past the last one when none was), 0 for a
// zero at. It is a binary search over the log, which is in time order (see
// EachDecision), and reads only the time of about log2(n) decisions.
func (t *Tx) firstDecisionAt(at time.Time) (uint64, error) {
	if at.IsZero() {
		return 0, nil
	}
	c := t.bucket(bDecisions).Cursor()
	first, _ := c.First()
	last, _ := c.Last()
	if first == nil {
		return 0, nil
	}
	lo, hi := binary.BigEndian.Uint64(first), binary.BigEndian.Uint64(last)
	var err error
	n := sort.Search(int(hi-lo+1), func(i int) bool {
		// The first key at or after lo+i: there is one, as lo+i <= hi.
		k, v := c.Seek(u64(lo + uint64(i)))
		var d struct {
			At time.Time `json:"at"`
		}
		if derr := json.Unmarshal(v, &d); derr != nil {
			err = fmt.Errorf("decode %s/%q: %w", bDecisions, k, derr)
			return true
		}
		return !d.At.Before(at)
	})
	return lo + uint64(n), err
}

// DecisionPage is one page of the decision log.
type DecisionPage struct {
	Decisions []Decision
	// Next is the sequence number of the page's last decision when more
	// follow (the next page's DecisionFilter.After), 0 when none do.
	Next uint64
}

// errPageFull stops the walk of DecisionPage one decision past the page.
var errPageFull = errors.New("page full")

// DecisionPage returns the first limit decisions that f selects, oldest
// first. It reads one decision more than it returns, to tell whether more
// follow.
func (t *Tx) DecisionPage(f DecisionFilter, limit int) (DecisionPage, error) {
	if limit < 1 {
		return DecisionPage{}, fmt.Errorf("decision page: limit %d: it must be at least 1", limit)
	}
	var p DecisionPage
	err := t.EachDecision(f, func(d Decision) error {
		if len(p.Decisions) == limit {
			p.Next = p.Decisions[limit-1].Seq
			return errPageFull
		}
		p.Decisions = append(p.Decisions, d)
		return nil
	})
	if errors.Is(err, errPageFull) {
		err = nil
	}
	return p, err
}

// Decisions returns the decision log, or the part of it for one workflow
// when wf is not empty, oldest first.
func (t *Tx) Decisions(wf string) ([]Decision, error) {
	var out []Decision
	err := t.EachDecision(DecisionFilter{Workflow: wf}, func(d Decision) error {
		out = append(out, d)
		return nil
	})
	return out, err
}

// LastDecisions returns the last n decisions of the log (all of them when
// it holds fewer), oldest first. It reads those n and no others.
func (t *Tx) LastDecisions(n int) ([]Decision, error) {
	var out []Decision
	c := t.bucket(bDecisions).Cursor()
	for k, v := c.Last(); k != nil && len(out) < n; k, v = c.Prev() {
		var d Decision
		if err := decodeJSON(bDecisions, k, v, &d); err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	slices.Reverse(out)
	return out, nil
}

// DecisionsSince calls fn for each decision made at or after since, newest
// first. The log is in time order, so it reads only that tail.
func (t *Tx) DecisionsSince(since time.Time, fn func(Decision) error) error {
	c := t.bucket(bDecisions).Cursor()
	for k, v := c.Last(); k != nil; k, v = c.Prev() {
		var d Decision
		if err := decodeJSON(bDecisions, k, v, &d); err != nil {
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
