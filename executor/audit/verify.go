package audit

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/countersign/countersign/executor/store"
)

// Reasons a link breaks, in the order Verify checks them for each record.
const (
	ReasonUndecodable = "record does not decode"
	ReasonPrev        = "prev does not match the previous record's hash: a record was deleted or reordered"
	ReasonVersion     = "unknown hash version: verify with the countersign that wrote it, or a newer one"
	ReasonHash        = "hash mismatch: record edited"
	ReasonID          = "id inside the record does not match its key: record moved"
	ReasonOrder       = "id out of order"
)

// Report is the result of Verify.
type Report struct {
	OK bool `json:"ok"`
	// Records is the number of records in the log, broken or not.
	Records int `json:"records"`
	// Head is the Hash of the last record when the chain is intact. Kept
	// outside the file (a ticket, another system), it lets a later Verify
	// detect what the chain alone cannot: a truncated or rewritten tail.
	Head string `json:"head,omitempty"`
	// Unsequenced counts the records a fleet wrote and has not chained yet
	// (Sequence): durable, but not in the chain Verify checks. The
	// oldest of them was made at OldestUnsequenced.
	Unsequenced       int       `json:"unsequenced,omitempty"`
	OldestUnsequenced time.Time `json:"oldest_unsequenced,omitzero"`
	// Checkpoints is the number of stored checkpoints the chain matches;
	// Anchored is the position of the last: the records up to it are
	// vouched for by a signature, those after it by the chain alone.
	Checkpoints int    `json:"checkpoints,omitempty"`
	Anchored    uint64 `json:"anchored,omitempty"`
	// Broken is the first broken link, nil when OK.
	Broken *Break `json:"broken,omitempty"`
}

// Break locates the first broken link.
type Break struct {
	// Index is the record's position in key order, from 0.
	Index int `json:"index"`
	// ID is the key the broken record is stored under.
	ID     string `json:"id"`
	Reason string `json:"reason"`
}

func (b Break) String() string {
	return fmt.Sprintf("record %d (%s): %s", b.Index, b.ID, b.Reason)
}

// Verify walks the log in key order, in one read transaction, and checks
// that each record decodes, its Prev is the previous record's Hash ("" for
// the first), its Hash recomputes, the id inside it is the key it is stored
// under, and ids are ULIDs that increase; then that every stored
// checkpoint verifies with a key the store registers and names the record
// at its position with that record's hash, and that none lies beyond the
// chain's end. It reports the first link that fails; a broken chain is a
// Report with OK false, not an error. The error is for a store that cannot
// be read.
//
// The keys come from the store itself, so this catches a chain rewritten
// or truncated by someone who left the checkpoints alone, not one who
// also registered a key of their own: a reviewer checks an export against
// keys obtained apart (VerifyExport).
func Verify(db *store.DB) (Report, error) {
	var (
		rep      Report
		prevHash string
		prevID   ulid.ULID
	)
	err := db.View(func(tx *store.Tx) error {
		rep, prevHash, prevID = Report{}, "", ulid.ULID{}
		cps, broken, err := storedCheckpoints(tx)
		if err != nil {
			return err
		}
		at := map[uint64]Checkpoint{}
		for _, c := range cps {
			at[c.Position] = c
		}
		err = tx.EachAudit(func(key, value []byte) error {
			i := rep.Records
			rep.Records++
			if rep.Broken != nil {
				return nil // count the rest; the first break is the one reported
			}
			r, id, reason := check(key, value, i, prevHash, prevID)
			c, anchored := at[uint64(i+1)]
			switch {
			case reason != "":
				rep.Broken = &Break{Index: i, ID: string(key), Reason: reason}
			case anchored && (c.ID != r.ID || c.Head != r.Hash):
				rep.Broken = &Break{Index: i, ID: string(key), Reason: ReasonCheckpointHead}
			case anchored:
				rep.Checkpoints, rep.Anchored = rep.Checkpoints+1, c.Position
			}
			prevHash, prevID = r.Hash, id
			return nil
		})
		if err != nil || rep.Broken != nil {
			return err
		}
		if broken != nil {
			rep.Broken = broken
			return nil
		}
		if n := len(cps); n > 0 && cps[n-1].Position > uint64(rep.Records) {
			c := cps[n-1]
			rep.Broken = &Break{Index: int(c.Position) - 1, ID: c.ID, Reason: ReasonCheckpointBeyond}
		}
		return nil
	})
	if err != nil {
		return Report{}, fmt.Errorf("verify audit: %w", err)
	}
	p, err := Unsequenced(db)
	if err != nil {
		return Report{}, fmt.Errorf("verify audit: %w", err)
	}
	rep.Unsequenced, rep.OldestUnsequenced = p.Records, p.Oldest
	rep.OK = rep.Broken == nil
	if rep.OK {
		rep.Head = prevHash
	}
	return rep, nil
}

// storedCheckpoints reads the checkpoints in tx and checks their
// signatures with the keys tx registers: the first that fails is broken.
func storedCheckpoints(tx *store.Tx) (cps []Checkpoint, broken *Break, err error) {
	keys := map[string]ed25519.PublicKey{}
	err = tx.EachAuditKey(func(value []byte) error {
		k, err := ParseKeys(value)
		if err != nil {
			return err
		}
		maps.Copy(keys, k)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	err = tx.EachAuditCheckpoint(0, func(value []byte) error {
		c, err := DecodeCheckpoint(value)
		if err == nil {
			err = c.Verify(keys)
		}
		if err != nil && broken == nil {
			broken = &Break{Index: int(c.Position) - 1, ID: c.ID, Reason: err.Error()}
		}
		cps = append(cps, c)
		return nil
	})
	return cps, broken, err
}

// check decodes the record at index i and returns it with its id, or why
// it breaks the chain.
func check(key, value []byte, i int, prevHash string, prevID ulid.ULID) (Record, ulid.ULID, string) {
	r, err := decode(value)
	if err != nil {
		return Record{}, ulid.ULID{}, ReasonUndecodable + ": " + err.Error()
	}
	if r.Prev != prevHash {
		return r, ulid.ULID{}, ReasonPrev
	}
	sum, err := r.Sum()
	if errors.Is(err, ErrVersion) {
		return r, ulid.ULID{}, ReasonVersion
	}
	if err != nil || sum != r.Hash {
		return r, ulid.ULID{}, ReasonHash
	}
	if r.ID != string(key) {
		return r, ulid.ULID{}, ReasonID
	}
	id, err := ulid.ParseStrict(r.ID)
	if err != nil || id.String() != r.ID || (i > 0 && id.Compare(prevID) <= 0) {
		return r, ulid.ULID{}, ReasonOrder
	}
	return r, id, ""
}
