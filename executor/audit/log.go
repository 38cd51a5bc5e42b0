package audit

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/countersign/countersign/executor/clock"
	"github.com/countersign/countersign/executor/store"
)

// Options configure a Log. The zero value is usable: the wall clock and
// crypto/rand.
type Options struct {
	// Clock stamps records whose At is zero and gives ids their time.
	// The drill and the tests inject a simulated one. Nil means the wall
	// clock.
	Clock clock.Clock
	// Entropy is the random part of ids. Default crypto/rand; the drill
	// passes a seeded source so that two runs print the same ids.
	Entropy io.Reader
}

// Log appends records and reads them back. It is safe for concurrent use;
// appends are ordered by the store's single writer.
type Log struct {
	clock clock.Clock

	mu      sync.Mutex
	entropy *ulid.MonotonicEntropy
}

// New returns a Log.
func New(opts Options) *Log {
	if opts.Clock == nil {
		opts.Clock = clock.Wall{}
	}
	if opts.Entropy == nil {
		opts.Entropy = rand.Reader
	}
	return &Log{clock: opts.Clock, entropy: ulid.Monotonic(opts.Entropy, 0)}
}

// Append chains r onto the log inside the caller's write transaction and
// returns it as stored, with ID, Prev and Hash filled (on a shared store,
// a fleet's, it leaves r to be chained by Sequence and returns it without
// them), At set from the clock
// when it was zero (and in UTC), Args and Detail normalized: Args with its
// keys sorted, Detail as decoded JSON (maps, slices, strings, bools and
// json.Number for numbers, whatever Go types went in). Call it in the
// same Update as the state change r records, and return its error from that
// Update: a change whose record cannot be written must not commit.
//
// It refuses a record without Kind or Actor (ErrInvalid) and a record that
// holds anything shaped like a JWT (ErrToken).
func (l *Log) Append(tx *store.Tx, r Record) (Record, error) {
	if r.Kind == "" || r.Actor == "" {
		return Record{}, fmt.Errorf("append audit: %w: kind and actor are required", ErrInvalid)
	}
	if err := normalize(&r); err != nil {
		return Record{}, fmt.Errorf("append audit %s: %w", r.Kind, err)
	}
	if p := findToken(r); p != "" {
		return Record{}, fmt.Errorf("append audit %s: %w at %s: record the token's jti instead", r.Kind, ErrToken, p)
	}
	if r.At.IsZero() {
		r.At = l.clock.Now()
	}
	r.At = r.At.UTC().Round(0) // drop the monotonic reading; it does not survive the store
	r.ID, r.Prev, r.Hash, r.Pending, r.Version = "", "", "", 0, VersionLegacy
	if tx.Shared() {
		// On a fleet the record waits, without its place, for Sequence.
		n, err := tx.NextPendingAudit()
		if err != nil {
			return Record{}, err
		}
		r.Pending = n
		value, err := encode(r)
		if err != nil {
			return Record{}, err
		}
		return r, tx.AppendPendingAudit(n, value)
	}
	return l.chain(tx, r)
}

// chain appends r after the last record of the log, with its id, Prev and
// Hash.
func (l *Log) chain(tx *store.Tx, r Record) (Record, error) {
	lastID, lastValue := tx.LastAudit()
	var last head
	if lastID != nil {
		// Only the last record's hash is needed here; Verify checks the
		// records themselves.
		var rec struct {
			Hash string `json:"hash"`
		}
		if err := json.Unmarshal(lastValue, &rec); err != nil {
			return Record{}, fmt.Errorf("append audit %s: the last record %s: %w", r.Kind, lastID, err)
		}
		if rec.Hash == "" {
			return Record{}, fmt.Errorf("append audit %s: the last record %s has no hash: %w", r.Kind, lastID, ErrInvalid)
		}
		last = head{id: lastID, hash: rec.Hash}
	}
	return l.chainAfter(tx, r, last)
}

// head is the last record of the chain: its id and hash (none when the
// log is empty).
type head struct {
	id   []byte
	hash string
}

// chainAfter appends r after last, which is the log's last record.
func (l *Log) chainAfter(tx *store.Tx, r Record, last head) (Record, error) {
	// The rule is chosen here, where the hash is made: a record a fleet
	// left pending under an older build is chained by this one's rule.
	r.Prev, r.Version = last.hash, VersionJCS
	id, err := l.nextID(r.At, last.id)
	if err != nil {
		return Record{}, fmt.Errorf("append audit %s: %w", r.Kind, err)
	}
	r.ID = id.String()
	if r.Hash, err = r.Sum(); err != nil {
		return Record{}, fmt.Errorf("append audit %s: %w", r.Kind, err)
	}
	value, err := encode(r)
	if err != nil {
		return Record{}, err
	}
	if err := tx.AppendAuditAfter(last.id, []byte(r.ID), value); err != nil {
		return Record{}, err
	}
	return r, nil
}

// nextID is a ULID for time at that sorts after last. Within one
// millisecond the monotonic entropy keeps ids increasing; when the clock
// stands behind the last record (it went back, or another process wrote in
// the same millisecond), the id is the last one plus one, so the log stays
// in append order whatever the clock says. At keeps the clock's reading.
func (l *Log) nextID(at time.Time, last []byte) (ulid.ULID, error) {
	l.mu.Lock()
	id, err := ulid.New(ulid.Timestamp(at), l.entropy)
	l.mu.Unlock()
	if last == nil {
		return id, err
	}
	prev, perr := ulid.ParseStrict(string(last))
	if perr != nil {
		return ulid.ULID{}, fmt.Errorf("the last record's id %q is not a ULID: %w", last, perr)
	}
	if err != nil && !errors.Is(err, ulid.ErrMonotonicOverflow) {
		return ulid.ULID{}, err
	}
	if err != nil || id.Compare(prev) <= 0 {
		return successor(prev)
	}
	return id, nil
}

// successor is id + 1 as a 128-bit big-endian integer: the next entropy in
// the same millisecond, carrying into the time when the entropy is full.
func successor(id ulid.ULID) (ulid.ULID, error) {
	for i := len(id) - 1; i >= 0; i-- {
		id[i]++
		if id[i] != 0 {
			return id, nil
		}
	}
	return ulid.ULID{}, errors.New("audit ids exhausted")
}

// Page is one page of List.
type Page struct {
	Records []Record `json:"records"`
	// Next is the cursor for the following page (the last id of this one),
	// "" when this page reaches the end of the log.
	Next string `json:"next,omitempty"`
}

// Page sizes of List.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
)

var errPageFull = errors.New("page full")

// List returns up to limit records after the record with id after ("" for
// the start), oldest first. limit <= 0 means DefaultLimit; it is capped at
// MaxLimit. A record that does not decode is an error here: Verify says
// where the chain breaks.
func (l *Log) List(db *store.DB, after string, limit int) (Page, error) {
	if after != "" {
		if _, err := ulid.ParseStrict(after); err != nil {
			return Page{}, fmt.Errorf("list audit after %q: %w", after, ErrCursor)
		}
	}
	if limit <= 0 {
		limit = DefaultLimit
	}
	limit = min(limit, MaxLimit)
	p := Page{Records: []Record{}}
	err := db.View(func(tx *store.Tx) error {
		return tx.EachAuditAfter([]byte(after), func(id, value []byte) error {
			if len(p.Records) == limit {
				p.Next = p.Records[limit-1].ID
				return errPageFull
			}
			r, err := Decode(value)
			if err != nil {
				return fmt.Errorf("record %s: %w", id, err)
			}
			p.Records = append(p.Records, r)
			return nil
		})
	})
	if err != nil && !errors.Is(err, errPageFull) {
		return Page{}, fmt.Errorf("list audit: %w", err)
	}
	return p, nil
}
