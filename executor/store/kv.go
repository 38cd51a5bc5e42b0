package store

// The store's records live in named buckets of ordered keys, as bbolt
// keeps them. Every accessor of Tx reaches its bucket through these small
// interfaces, so one set of accessors runs on either backend: bbolt
// (bolt.go) or PostgreSQL (postgres.go).

// backend runs the transactions of a DB.
type backend interface {
	// update runs fn in a write transaction and commits it; fn may run
	// more than once (see DB.Update).
	update(fn func(kvTx) error) error
	// updateRows is update for a transaction whose reads and writes are
	// rows of one key it names (DB.UpdateRows).
	updateRows(fn func(kvTx) error) error
	// batchRows and enqueueRows are batch and enqueue for such a
	// transaction.
	batchRows(fn func(kvTx) error) error
	enqueueRows(fn func(kvTx) error) <-chan error
	// view runs fn in a read-only snapshot.
	view(fn func(kvTx) error) error
	// batch is update, possibly sharing the commit with concurrent callers.
	batch(fn func(kvTx) error) error
	// batchIn is batch, queued in this process behind the writes of the
	// same lane (DB.BatchIn).
	batchIn(lane string, fn func(kvTx) error) error
	// enqueue is batch returning at once; the outcome arrives on the channel.
	enqueue(fn func(kvTx) error) <-chan error
	// flush waits for every write enqueued before it.
	flush()
	// commits counts committed write transactions (see DB.Commits).
	commits() (uint64, error)
	close() error
}

// kvTx is one transaction of a backend.
type kvTx interface {
	bucket(name []byte) kvBucket
	// counter returns the next value of the named counter, from 1.
	counter(name string) (uint64, error)
	// shared reports whether other processes write the same store.
	shared() bool
	// partition names this writer's rows of the running sums (spent.go):
	// nil on bbolt, which has one writer.
	partition() []byte
	// sumRanges is the sum of the values in the key ranges, each value's
	// first 8 bytes read as a big-endian integer (a running sum, or a
	// spending entry's amount). PostgreSQL adds them up itself, in one
	// round trip for all the ranges.
	sumRanges(ranges []keyRange) int64
	// prefetch reads the records of reads ahead, in one round trip on
	// PostgreSQL; bbolt, whose reads are memory, ignores it.
	prefetch(reads []Read)
	// held and assume carry records read in one transaction to another
	// (Tx.Held, Tx.Assume); bbolt ignores them.
	held(reads []Read) Held
	assume(h Held)
}

// keyRange is the keys of a bucket from lo (inclusive) to hi (exclusive).
type keyRange struct {
	bucket []byte
	lo, hi []byte
}

// kvBucket is one bucket inside a transaction. Keys order bytewise. Get
// returns nil for a missing key; a value it returns is valid only until
// the transaction ends. A backend whose reads can fail (PostgreSQL) makes
// the first failure the whole transaction's outcome, so a read that failed
// can return nil here without the accessors checking for it: whatever they
// decide from it is rolled back and the caller gets the failure.
type kvBucket interface {
	Get(key []byte) []byte
	Put(key, value []byte) error
	Delete(key []byte) error
	Cursor() kvCursor
	// ForEach calls fn for every key in order, stopping at fn's first error.
	ForEach(fn func(k, v []byte) error) error
	// Add adds delta to the 8-byte big-endian integer at key (absent:
	// 0). On PostgreSQL it is a write like Put, sent with the next read
	// or the commit: it reads nothing first. A sum that comes to zero may
	// be deleted (bbolt) or kept (PostgreSQL).
	Add(key []byte, delta int64) error
	// NextSequence returns the bucket's next sequence number, from 1.
	NextSequence() (uint64, error)
	// Expect makes the transaction fail with mismatch unless key holds
	// exactly value at this point of it (after the writes made before).
	// On bbolt it checks at once; on PostgreSQL the check is queued with
	// the writes and rides with the next read or the commit, so it costs
	// no round trip of its own, and the transaction's error is mismatch.
	Expect(key, value []byte, mismatch error) error
}

// kvCursor walks a bucket in key order; each move returns the key and
// value it lands on, or nil, nil past either end.
type kvCursor interface {
	First() (key, value []byte)
	Last() (key, value []byte)
	// Seek moves to the first key at or after seek.
	Seek(seek []byte) (key, value []byte)
	// SeekRange is Seek(lo) for a walk that ends before hi: the Next
	// moves after it return nil, nil at the first key at or after hi (nil:
	// no end), until the next First, Last or Seek. It is the move to use
	// when the end is known: PostgreSQL then reads those keys and no
	// others, in as few round trips as it can, and its SERIALIZABLE check
	// watches only them.
	SeekRange(lo, hi []byte) (key, value []byte)
	Next() (key, value []byte)
	Prev() (key, value []byte)
}

// walk calls fn for every key of b from lo (inclusive) to hi (exclusive;
// nil: to the end) in order, stopping at fn's first error.
func walk(b kvBucket, lo, hi []byte, fn func(k, v []byte) error) error {
	c := b.Cursor()
	for k, v := c.SeekRange(lo, hi); k != nil; k, v = c.Next() {
		if err := fn(k, v); err != nil {
			return err
		}
	}
	return nil
}
