package simserver

import (
	"bytes"
	"encoding/binary"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/countersign/countersign/executor/groupcommit"

	"github.com/countersign/countersign/executor/sim/actorcheck"
)

// The buckets of the single-use check, in every system's own file. The
// second orders the same records by expiry, so pruning reads only the
// expired ones.
var (
	bucketJTIs      = []byte("actor_jtis")       // jti -> exp (8-byte big-endian Unix seconds)
	bucketJTIExpiry = []byte("actor_jti_expiry") // exp + jti -> nothing
)

// pruneBatch bounds the expired records one Use deletes, so no request
// pays for a long backlog; requests outpace expiry, so it is still drained.
const pruneBatch = 32

// replays keeps the jtis of accepted tokens in the system's bbolt file, so
// that a restarted system still refuses a replay. It serves the verifier's
// own Verify; the systems' handlers record the jti through [Core.Act] and
// [Core.Refuse] instead, in the transaction that acts.
type replays struct {
	group *groupcommit.Group // set once the file is open, before the first request
}

var _ actorcheck.Replays = (*replays)(nil)

func createReplayBuckets(tx *bolt.Tx) error {
	for _, b := range [][]byte{bucketJTIs, bucketJTIExpiry} {
		if _, err := tx.CreateBucketIfNotExists(b); err != nil {
			return err
		}
	}
	return nil
}

// Use records jti until exp in one write transaction with its lookup, so
// concurrent uses of one jti cannot both pass.
func (r *replays) Use(jti string, exp, now time.Time) (bool, error) {
	var seen bool
	err := r.group.Update(func(tx *bolt.Tx) (err error) {
		seen, err = record(tx, jti, exp, now)
		return err
	})
	return seen, err
}

// record records jti until exp in tx and reports whether it was recorded
// already (then it changes nothing). The lookup and the record are one step
// of a write transaction, so of two uses of one jti only one finds it new.
func record(tx *bolt.Tx, jti string, exp, now time.Time) (seen bool, err error) {
	ids, byExp := tx.Bucket(bucketJTIs), tx.Bucket(bucketJTIExpiry)
	if ids.Get([]byte(jti)) != nil {
		return true, nil
	}
	if err := prune(ids, byExp, now); err != nil {
		return false, err
	}
	at := binary.BigEndian.AppendUint64(nil, uint64(exp.Unix()))
	if err := ids.Put([]byte(jti), at); err != nil {
		return false, err
	}
	return false, byExp.Put(append(at, jti...), nil)
}

// prune deletes up to pruneBatch records that expired before now.
func prune(ids, byExp *bolt.Bucket, now time.Time) error {
	limit := binary.BigEndian.AppendUint64(nil, uint64(now.Unix()))
	c := byExp.Cursor()
	for range pruneBatch {
		k, _ := c.First()
		if len(k) < 8 || bytes.Compare(k[:8], limit) >= 0 {
			return nil
		}
		if err := ids.Delete(k[8:]); err != nil {
			return err
		}
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return nil
}
