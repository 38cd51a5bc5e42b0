package simserver

import (
	"bytes"
	"encoding/binary"
	"errors"
	"time"

	bolt "go.etcd.io/bbolt"

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
// that a restarted system still refuses a replay.
type replays struct {
	db *bolt.DB // set once the file is open, before the first request
}

var _ actorcheck.Replays = (*replays)(nil)

var errSeen = errors.New("jti already used")

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
	err := r.db.Update(func(tx *bolt.Tx) error {
		ids, byExp := tx.Bucket(bucketJTIs), tx.Bucket(bucketJTIExpiry)
		if ids.Get([]byte(jti)) != nil {
			return errSeen
		}
		if err := prune(ids, byExp, now); err != nil {
			return err
		}
		at := binary.BigEndian.AppendUint64(nil, uint64(exp.Unix()))
		if err := ids.Put([]byte(jti), at); err != nil {
			return err
		}
		return byExp.Put(append(at, jti...), nil)
	})
	if errors.Is(err, errSeen) {
		return true, nil
	}
	return false, err
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
