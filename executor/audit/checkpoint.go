package audit

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	"github.com/countersign/countersign/executor/audit/jcs"
	"github.com/countersign/countersign/executor/store"
)

// Checkpoint is a signed statement of the chain's head: the first
// Position records of the log end with the record ID, whose hash is
// Head. A copy kept outside the sidecar's reach (--audit-checkpoint-url)
// lets a reviewer prove that a later copy of the log was not rewritten
// or truncated up to Position, which the chain alone cannot show.
type Checkpoint struct {
	// Position is the number of records the checkpoint covers, from the
	// first: record Position-1 (from 0) is ID.
	Position uint64    `json:"position"`
	ID       string    `json:"id"`
	Head     string    `json:"head"`
	At       time.Time `json:"at"`
	// KeyID names the key that signed it (a kid of the keys endpoint).
	KeyID string `json:"kid"`
	// Signature is Ed25519 over Signed(), base64url without padding.
	Signature string `json:"sig"`
}

// Signed is the byte form the signature is over: the RFC 8785 form of
// the checkpoint without its "sig" member, the same rule as the records'
// hashes.
func (c Checkpoint) Signed() ([]byte, error) {
	b, err := jcs.Marshal(struct {
		Position uint64    `json:"position"`
		ID       string    `json:"id"`
		Head     string    `json:"head"`
		At       time.Time `json:"at"`
		KeyID    string    `json:"kid"`
	}{c.Position, c.ID, c.Head, c.At, c.KeyID})
	if err != nil {
		return nil, fmt.Errorf("checkpoint at %d: %w", c.Position, err)
	}
	return b, nil
}

// sign fills KeyID and Signature.
func (s Signer) sign(c Checkpoint) (Checkpoint, error) {
	c.KeyID = s.kid
	msg, err := c.Signed()
	if err != nil {
		return Checkpoint{}, err
	}
	c.Signature = base64.RawURLEncoding.EncodeToString(ed25519.Sign(s.key, msg))
	return c, nil
}

// Verify checks c's signature with the key it names among keys
// (ErrCheckpoint when the key is not among them or the signature fails).
func (c Checkpoint) Verify(keys map[string]ed25519.PublicKey) error {
	pub, ok := keys[c.KeyID]
	if !ok {
		return fmt.Errorf("%w: checkpoint at %d is signed by key %q, which is not among the trusted keys", ErrCheckpoint, c.Position, c.KeyID)
	}
	sig, err := base64.RawURLEncoding.DecodeString(c.Signature)
	if err != nil {
		return fmt.Errorf("%w: checkpoint at %d: the signature is not base64url", ErrCheckpoint, c.Position)
	}
	msg, err := c.Signed()
	if err != nil {
		return err
	}
	if !ed25519.Verify(pub, msg, sig) {
		return fmt.Errorf("%w: checkpoint at %d: the signature does not verify with key %q", ErrCheckpoint, c.Position, c.KeyID)
	}
	return nil
}

// DecodeCheckpoint reads one checkpoint, strictly.
func DecodeCheckpoint(value []byte) (Checkpoint, error) {
	var c Checkpoint
	if err := strictUnmarshal(value, &c); err != nil {
		return Checkpoint{}, fmt.Errorf("%w: %v", ErrCheckpoint, err)
	}
	return c, nil
}

// CheckpointRule says when a checkpoint is due: once Every records
// have been chained since the last one, or Interval has passed since it
// with at least one record chained. The first record of a log is
// checkpointed at once (there is no last one to wait from).
type CheckpointRule struct {
	Every    int
	Interval time.Duration
}

// Defaults of CheckpointRule. A minute's worth of records at the
// sidecar's busiest is far below Every; Interval is then what bounds how
// much of the chain stands unanchored, 30 s, for one signature and one
// small write per interval and none while nothing happens. Every bounds
// the records between two checkpoints in a burst, so that a broken
// segment is found within 1000 records.
const (
	DefaultCheckpointEvery    = 1000
	DefaultCheckpointInterval = 30 * time.Second
)

// Checkpoint signs the chain's head with s, in one write transaction,
// when rule says one is due, and stores it; it returns the checkpoint,
// or nil when none was due. Whether one is due is read first in a read
// transaction, so a look that finds nothing to sign writes nothing (on
// bbolt, no commit and no fsync). On a shared store only the sequencer
// signs (Sequence): holder must hold the sequencer lease or take it
// (free or expired), which it then renews for ttl, so a checkpoint always
// covers a chain no other sidecar is extending; held reports whether it
// may.
func (l *Log) Checkpoint(db *store.DB, s Signer, rule CheckpointRule, holder string, ttl time.Duration) (c *Checkpoint, held bool, err error) {
	if rule.Every <= 0 {
		rule.Every = DefaultCheckpointEvery
	}
	if rule.Interval <= 0 {
		rule.Interval = DefaultCheckpointInterval
	}
	now := l.clock.Now().UTC().Round(0)
	var next *Checkpoint
	err = db.View(func(tx *store.Tx) error {
		next, held, err = due(tx, rule, holder, now)
		return err
	})
	if err != nil || next == nil {
		return nil, held, err
	}
	err = db.Update(func(tx *store.Tx) error {
		c = nil
		var err error
		if next, held, err = due(tx, rule, holder, now); err != nil || next == nil {
			return err // the lease moved, or another sidecar signed, since the read
		}
		signed, err := s.sign(*next)
		if err != nil {
			return err
		}
		value, err := json.Marshal(signed)
		if err != nil {
			return err
		}
		if err := tx.AppendAuditCheckpoint(signed.Position, value); err != nil {
			return err
		}
		if tx.Shared() && held {
			if err := renewLease(tx, holder, now.Add(ttl)); err != nil {
				return err
			}
		}
		c = &signed
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("checkpoint the audit: %w", err)
	}
	return c, held, nil
}

// due is the checkpoint rule asks for at now, unsigned, or nil; held
// reports whether holder may act as the sequencer (always on bbolt).
func due(tx *store.Tx, rule CheckpointRule, holder string, now time.Time) (*Checkpoint, bool, error) {
	if tx.Shared() && !takeLease(tx, holder, now) {
		return nil, false, nil
	}
	var last Checkpoint
	if raw := tx.LastAuditCheckpoint(); raw != nil {
		var err error
		if last, err = DecodeCheckpoint(raw); err != nil {
			return nil, true, fmt.Errorf("the last checkpoint: %w", err)
		}
	}
	n, id, head, err := headAfter(tx, last.ID)
	if err != nil || n == 0 || (n < rule.Every && now.Sub(last.At) < rule.Interval) {
		return nil, true, err
	}
	return &Checkpoint{Position: last.Position + uint64(n), ID: id, Head: head, At: now}, true, nil
}

// headAfter counts the records after the record at id ("" for the start)
// and returns the last one's id and hash.
func headAfter(tx *store.Tx, after string) (n int, id, hash string, err error) {
	var lastValue []byte
	err = tx.EachAuditAfter([]byte(after), func(k, v []byte) error {
		n++
		id, lastValue = string(k), v
		return nil
	})
	if err != nil || n == 0 {
		return 0, "", "", err
	}
	var rec struct {
		Hash string `json:"hash"`
	}
	if err := json.Unmarshal(lastValue, &rec); err != nil || rec.Hash == "" {
		return 0, "", "", fmt.Errorf("the last record %s has no hash: %w", id, ErrInvalid)
	}
	return n, id, rec.Hash, nil
}

// takeLease reports whether holder may act as the sequencer at now: the
// lease is its own, free, or expired.
func takeLease(tx *store.Tx, holder string, now time.Time) bool {
	var lease sequencerLease
	if raw := tx.Meta(sequencerKey); raw != nil && json.Unmarshal(raw, &lease) != nil {
		lease = sequencerLease{} // unreadable: taken over
	}
	return lease.Holder == "" || lease.Holder == holder || !now.Before(lease.Expires)
}

func renewLease(tx *store.Tx, holder string, until time.Time) error {
	raw, err := json.Marshal(sequencerLease{Holder: holder, Expires: until})
	if err != nil {
		return err
	}
	return tx.PutMeta(sequencerKey, raw)
}

// Checkpoints returns the stored checkpoints after position after (0:
// all), oldest first.
func Checkpoints(db *store.DB, after uint64) ([]Checkpoint, error) {
	out := []Checkpoint{}
	err := db.View(func(tx *store.Tx) error {
		out = out[:0]
		return tx.EachAuditCheckpoint(after, func(value []byte) error {
			c, err := DecodeCheckpoint(value)
			if err != nil {
				return err
			}
			out = append(out, c)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("read audit checkpoints: %w", err)
	}
	return out, nil
}

// RegisterKey records s's public key in the store, so that every sidecar
// sharing it publishes it (Keys).
func RegisterKey(db *store.DB, s Signer) error {
	value, err := json.Marshal(s.JWK())
	if err != nil {
		return err
	}
	if err := db.Update(func(tx *store.Tx) error { return tx.PutAuditKey(s.kid, value) }); err != nil {
		return fmt.Errorf("register the audit key %s: %w", s.kid, err)
	}
	return nil
}

// Keys returns every public key registered in the store, in key id
// order: the keys that may have signed its checkpoints.
func Keys(db *store.DB) (JWKS, error) {
	set := JWKS{Keys: []JWK{}}
	err := db.View(func(tx *store.Tx) error {
		set.Keys = set.Keys[:0]
		return tx.EachAuditKey(func(value []byte) error {
			var k JWK
			if err := strictUnmarshal(value, &k); err != nil {
				return fmt.Errorf("%w: a stored key: %v", ErrKey, err)
			}
			set.Keys = append(set.Keys, k)
			return nil
		})
	})
	if err != nil {
		return JWKS{}, fmt.Errorf("read audit keys: %w", err)
	}
	set.Keys = sortedJWKs(set.Keys)
	return set, nil
}
