package ledger

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/countersign/countersign/executor/sim/actorcheck"
	"github.com/countersign/countersign/executor/sim/fault"
	"github.com/countersign/countersign/executor/sim/simhttp"
)

// Kind says how an entry came to be.
type Kind string

// Entry kinds.
const (
	KindRefund   Kind = "refund"   // an agent's refund, through the sidecar
	KindReversal Kind = "reversal" // undoes a refund; points at it
	KindExternal Kind = "external" // a person's entry made outside the sidecar
)

// Entry is one ledger line. Amounts are integer cents.
type Entry struct {
	ID       string    `json:"id"`
	Kind     Kind      `json:"kind"`
	Order    string    `json:"order"`
	Amount   int64     `json:"amount"`
	Line     string    `json:"line,omitempty"`     // a line-item refund's line
	Quantity int64     `json:"quantity,omitempty"` // and its units
	Key      string    `json:"key"`
	By       string    `json:"by"`
	Agent    string    `json:"agent,omitempty"`
	Reverses string    `json:"reverses,omitempty"`
	At       time.Time `json:"at"`
}

// Buckets of ledger.db. Entries are keyed by their 8-byte big-endian
// sequence so that a cursor walks them in id order.
var (
	bucketEntries   = []byte("entries")   // seq -> Entry JSON
	bucketKeys      = []byte("keys")      // idempotency key -> keyRecord JSON
	bucketReversals = []byte("reversals") // reversed entry id -> reversal id
)

func createBuckets(tx *bolt.Tx) error {
	for _, b := range [][]byte{bucketEntries, bucketKeys, bucketReversals} {
		if _, err := tx.CreateBucketIfNotExists(b); err != nil {
			return err
		}
	}
	return nil
}

// keyRecord is what an idempotency key remembers: the entry it made and a
// fingerprint of the parameters it was first used with.
type keyRecord struct {
	Seq         uint64 `json:"seq"`
	Fingerprint string `json:"fp"`
}

func seqKey(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

// seqOf parses an entry id "L<n>".
func seqOf(id string) (uint64, bool) {
	n, err := strconv.ParseUint(strings.TrimPrefix(id, "L"), 10, 64)
	return n, err == nil && strings.HasPrefix(id, "L") && n > 0
}

func getEntry(b *bolt.Bucket, seq uint64) (Entry, bool, error) {
	v := b.Get(seqKey(seq))
	if v == nil {
		return Entry{}, false, nil
	}
	var e Entry
	if err := json.Unmarshal(v, &e); err != nil {
		return Entry{}, false, fmt.Errorf("entry L%d: %w", seq, err)
	}
	return e, true, nil
}

// write is one request to record an entry.
type write struct {
	entry       Entry              // all but ID and At
	key         string             // idempotency key, may be empty
	fingerprint string             // what the key binds: operation and parameters
	token       *actorcheck.Claims // the actor token that authorizes it; nil for an external entry
}

// outcome is what a write did.
type outcome struct {
	entry    Entry
	replayed bool
	effects  fault.Effects
	refusal  error // the request's answer when it made nothing (409, 404)
}

// commit records w, or replays what its key recorded, in one bbolt write
// transaction: the key lookup and the insert cannot interleave with another
// request's. A write authorized by a token records the token's jti in the
// same transaction (Core.Act), which concurrent requests share; the
// injected faults apply to those writes only.
func (s *Server) commit(w write) (outcome, error) {
	var (
		out  outcome
		take = s.faultsOnce(w.token != nil)
	)
	fn := func(tx *bolt.Tx) (err error) {
		out, err = s.apply(tx, w, take)
		return err
	}
	var err error
	if w.token != nil {
		err = s.core.Act(*w.token, fn)
	} else {
		err = s.core.Update(fn)
	}
	if err == nil {
		err = out.refusal
	}
	return out, err
}

// faultsOnce takes the injected faults of one write the first time it is
// asked, and answers the same afterwards: the transaction function may run
// more than once, and must not take a second write's faults.
func (s *Server) faultsOnce(faulty bool) func(replay, refund bool) fault.Effects {
	var (
		taken   bool
		effects fault.Effects
	)
	return func(replay, refund bool) fault.Effects {
		if !faulty || taken {
			return effects
		}
		taken = true
		if replay {
			effects = s.core.Faults.TakeReplay()
		} else {
			effects = s.core.Faults.Take(refund)
		}
		return effects
	}
}

// apply is commit's transaction. It changes nothing when it refuses the
// request, so the refusal is kept in the outcome and the transaction still
// commits the token's jti.
func (s *Server) apply(tx *bolt.Tx, w write, take func(replay, refund bool) fault.Effects) (outcome, error) {
	var out outcome
	entries, keys := tx.Bucket(bucketEntries), tx.Bucket(bucketKeys)
	if w.key != "" {
		if v := keys.Get([]byte(w.key)); v != nil {
			var rec keyRecord
			if err := json.Unmarshal(v, &rec); err != nil {
				return out, fmt.Errorf("key record: %w", err)
			}
			if rec.Fingerprint != w.fingerprint {
				out.refusal = simhttp.Errorf(http.StatusConflict, CodeKeyReused,
					"Idempotency-Key %q was first used with other parameters (entry L%d); use a new key for a new request", w.key, rec.Seq)
				return out, nil
			}
			e, ok, err := getEntry(entries, rec.Seq)
			if err != nil || !ok {
				return out, fmt.Errorf("key %q names missing entry L%d: %v", w.key, rec.Seq, err)
			}
			out.entry, out.replayed, out.effects = e, true, take(true, false)
			return out, nil
		}
	}
	e := w.entry
	if e.Kind == KindReversal {
		orig, err := reversible(tx, e.Reverses)
		var answer *simhttp.Error
		if errors.As(err, &answer) {
			out.refusal = err
			return out, nil
		}
		if err != nil {
			return out, err
		}
		e.Order, e.Amount = orig.Order, orig.Amount
	}
	seq, err := entries.NextSequence()
	if err != nil {
		return out, err
	}
	e.ID, e.At = "L"+strconv.FormatUint(seq, 10), s.core.Clock.Now().UTC()
	out.effects = take(false, e.Kind == KindRefund)
	if out.effects.WrongAmount {
		e.Amount /= 10
	}
	out.entry = e
	if out.effects.LoseWrite {
		// Acknowledged, never kept: only the id sequence advances, so
		// a later entry cannot take the lost one's id.
		s.core.Log.Warn("fault: lose_write", "entry", e.ID)
		return out, nil
	}
	v, err := json.Marshal(e)
	if err != nil {
		return out, err
	}
	if err := entries.Put(seqKey(seq), v); err != nil {
		return out, err
	}
	if w.key != "" {
		rec, err := json.Marshal(keyRecord{Seq: seq, Fingerprint: w.fingerprint})
		if err != nil {
			return out, err
		}
		if err := keys.Put([]byte(w.key), rec); err != nil {
			return out, err
		}
	}
	if e.Kind == KindReversal {
		return out, tx.Bucket(bucketReversals).Put([]byte(e.Reverses), []byte(e.ID))
	}
	return out, nil
}

// reversible returns the entry id names if it may be reversed: it exists,
// is not itself a reversal and has not been reversed yet.
func reversible(tx *bolt.Tx, id string) (Entry, error) {
	seq, ok := seqOf(id)
	if !ok {
		return Entry{}, simhttp.Errorf(http.StatusNotFound, simhttp.CodeNotFound, "no entry %s", id)
	}
	orig, ok, err := getEntry(tx.Bucket(bucketEntries), seq)
	if err != nil {
		return Entry{}, err
	}
	if !ok {
		return Entry{}, simhttp.Errorf(http.StatusNotFound, simhttp.CodeNotFound, "no entry %s", id)
	}
	if orig.Kind == KindReversal {
		return Entry{}, simhttp.Errorf(http.StatusConflict, CodeNotReversible, "%s is itself a reversal", id)
	}
	if by := tx.Bucket(bucketReversals).Get([]byte(id)); by != nil {
		return Entry{}, simhttp.Errorf(http.StatusConflict, CodeAlreadyReversed, "%s was already reversed by %s", id, by)
	}
	return orig, nil
}

// Entries returns every entry in id order.
func (s *Server) Entries() ([]Entry, error) {
	all := []Entry{}
	err := s.core.DB.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketEntries).ForEach(func(_, v []byte) error {
			var e Entry
			if err := json.Unmarshal(v, &e); err != nil {
				return err
			}
			all = append(all, e)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("ledger: entries: %w", err)
	}
	return all, nil
}

// ByKey returns the entry recorded under an idempotency key, or ErrNotFound.
func (s *Server) ByKey(key string) (Entry, error) {
	var (
		e  Entry
		ok bool
	)
	err := s.core.DB.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketKeys).Get([]byte(key))
		if v == nil {
			return nil
		}
		var rec keyRecord
		if err := json.Unmarshal(v, &rec); err != nil {
			return err
		}
		var err error
		e, ok, err = getEntry(tx.Bucket(bucketEntries), rec.Seq)
		return err
	})
	if err != nil {
		return Entry{}, fmt.Errorf("ledger: by key: %w", err)
	}
	if !ok {
		return Entry{}, fmt.Errorf("%w: no entry under key %q", ErrNotFound, key)
	}
	return e, nil
}

// AddExternal records an entry made outside the sidecar (a finance clerk's
// refund): no token, no key, no injected faults.
func (s *Server) AddExternal(order string, amount int64, by string) (Entry, error) {
	if !orderID.MatchString(order) || amount <= 0 || by == "" {
		return Entry{}, fmt.Errorf("ledger: external entry needs an order id, a positive amount and by")
	}
	out, err := s.commit(write{entry: Entry{Kind: KindExternal, Order: order, Amount: amount, By: by}})
	if err != nil {
		return Entry{}, fmt.Errorf("ledger: external entry: %w", err)
	}
	return out.entry, nil
}
