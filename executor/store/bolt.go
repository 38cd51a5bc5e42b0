package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/countersign/countersign/executor/groupcommit"
)

// Options tune Open. The zero value is what production uses.
type Options struct {
	// Timeout is how long Open waits for another process to release the
	// file lock before failing with ErrLocked. Default 1s.
	Timeout time.Duration
	// NoSync skips fsync on commit. Only benchmarks comparing costs set it:
	// without fsync a crash can lose acknowledged steps.
	NoSync bool
	// MaxBatch caps how many write functions one group commit (Batch)
	// carries. Default groupcommit.DefaultMax.
	MaxBatch int
	// FailWrite, when set, is called at the end of every write function
	// (Update, Batch, BatchIn, Enqueue), inside its transaction; an error
	// it returns fails that write as a failed commit does: nothing the
	// function wrote is kept and its caller gets the error. Only the
	// seeded simulation (tests/sim) sets it, to fail the store's writes
	// at the moments it chooses; production leaves it nil.
	FailWrite func() error
}

// Open opens (creating if needed) the store at path, a bbolt file.
func Open(path string, opts Options) (*DB, error) {
	if opts.Timeout == 0 {
		opts.Timeout = time.Second
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, classifyOpen(err))
	}
	// The freelist is rebuilt at open instead of written on every commit:
	// otherwise each commit writes a freelist that grows with the file, and
	// a decision would get slower as history grows.
	b, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: opts.Timeout, NoSync: opts.NoSync,
		NoFreelistSync: true, FreelistType: bolt.FreelistMapType})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("open store %s: %w", path, ErrLocked)
	}
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, classifyOpen(err))
	}
	err = b.Update(func(btx *bolt.Tx) error {
		// A store written before the reship index existed gets it built
		// from its steps, once.
		backfill := btx.Bucket(bOrderReships) == nil && btx.Bucket(bSteps) != nil
		// Likewise the running sums of the spending indexes, from their
		// entries.
		// And the workflow indexes, from the workflows.
		unindexed := btx.Bucket(bWorkflowsBySeq) == nil || btx.Bucket(bWorkflowsByUser) == nil
		var sumsMissing []spentIndex
		for _, ix := range []spentIndex{repSpent, agentSpent} {
			if btx.Bucket(ix.sums) == nil && btx.Bucket(ix.entries) != nil {
				sumsMissing = append(sumsMissing, ix)
			}
		}
		for _, name := range allBuckets {
			if _, err := btx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		tx := &Tx{kv: boltTx{btx}}
		if unindexed {
			if err := tx.indexWorkflows(); err != nil {
				return err
			}
		}
		for _, ix := range sumsMissing {
			if err := ix.indexSums(tx); err != nil {
				return err
			}
		}
		if backfill {
			return tx.indexReships()
		}
		return nil
	})
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("open store %s: create buckets: %w", path, err)
	}
	db := &DB{kv: &boltStore{db: b, group: groupcommit.New(b, opts.MaxBatch), failWrite: opts.FailWrite}}
	if err := db.buildOrderRefunds(); err != nil {
		db.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	return db, nil
}

// classifyOpen adds ErrUnwritable to an error that a person fixes by
// choosing another directory, keeping the cause.
func classifyOpen(err error) error {
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EROFS) {
		return fmt.Errorf("%w: %w", ErrUnwritable, err)
	}
	return err
}

// boltStore is the embedded backend: one bbolt file, one writer at a
// time, Batch as a group commit (package groupcommit).
type boltStore struct {
	db    *bolt.DB
	group *groupcommit.Group
	// failWrite is Options.FailWrite (nil: writes fail only for cause).
	failWrite func() error
}

var _ backend = (*boltStore)(nil)

func (s *boltStore) updateRows(fn func(kvTx) error) error         { return s.update(fn) }
func (s *boltStore) batchRows(fn func(kvTx) error) error          { return s.batch(fn) }
func (s *boltStore) enqueueRows(fn func(kvTx) error) <-chan error { return s.enqueue(fn) }

// write is fn as a write function of bbolt's, failed by failWrite.
func (s *boltStore) write(fn func(kvTx) error) func(*bolt.Tx) error {
	return func(tx *bolt.Tx) error {
		if err := fn(boltTx{tx}); err != nil || s.failWrite == nil {
			return err
		}
		return s.failWrite()
	}
}

func (s *boltStore) update(fn func(kvTx) error) error {
	return s.db.Update(s.write(fn))
}

func (s *boltStore) view(fn func(kvTx) error) error {
	return s.db.View(func(tx *bolt.Tx) error { return fn(boltTx{tx}) })
}

func (s *boltStore) batch(fn func(kvTx) error) error {
	return s.group.Update(s.write(fn))
}

// batchIn is batch: bbolt has one writer at a time already.
func (s *boltStore) batchIn(_ string, fn func(kvTx) error) error { return s.batch(fn) }

func (s *boltStore) enqueue(fn func(kvTx) error) <-chan error {
	return s.group.Enqueue(s.write(fn))
}

func (s *boltStore) flush() { s.group.Flush() }

// commits is the id of the last committed write transaction: bbolt raises
// it by one on every commit and never otherwise.
func (s *boltStore) commits() (uint64, error) {
	var id int
	err := s.db.View(func(tx *bolt.Tx) error { id = tx.ID(); return nil })
	return uint64(id), err
}

func (s *boltStore) close() error {
	s.group.Flush()
	return s.db.Close()
}

// boltTx and boltBucket are bbolt's own types behind the interfaces; each
// holds one pointer, so handing one out allocates nothing.
type boltTx struct{ tx *bolt.Tx }

func (t boltTx) bucket(name []byte) kvBucket { return boltBucket{t.tx.Bucket(name)} }

func (boltTx) shared() bool      { return false }
func (boltTx) partition() []byte { return nil }
func (boltTx) prefetch([]Read)   {}
func (boltTx) held([]Read) Held  { return Held{} }
func (boltTx) assume(Held)       {}

// counter keeps a named counter under its name in the meta bucket.
func (t boltTx) counter(name string) (uint64, error) {
	m := t.tx.Bucket(bMeta)
	var n uint64
	if raw := m.Get([]byte(name)); raw != nil {
		n = binary.BigEndian.Uint64(raw)
	}
	n++
	return n, m.Put([]byte(name), u64(n))
}

type boltBucket struct{ *bolt.Bucket }

func (b boltBucket) Cursor() kvCursor { return &boltCursor{Cursor: b.Bucket.Cursor()} }

func (b boltBucket) Add(key []byte, delta int64) error {
	var n int64
	if raw := b.Get(key); raw != nil {
		n = int64(binary.BigEndian.Uint64(raw))
	}
	if n += delta; n == 0 {
		return b.Delete(key)
	}
	return b.Put(key, u64(uint64(n)))
}

func (t boltTx) sumRanges(ranges []keyRange) int64 {
	var total int64
	for _, r := range ranges {
		c := t.tx.Bucket(r.bucket).Cursor()
		for k, v := c.Seek(r.lo); k != nil && (r.hi == nil || bytes.Compare(k, r.hi) < 0); k, v = c.Next() {
			total += int64(binary.BigEndian.Uint64(v))
		}
	}
	return total
}

func (b boltBucket) Expect(key, value []byte, mismatch error) error {
	if got := b.Get(key); got == nil || !bytes.Equal(got, value) {
		return mismatch
	}
	return nil
}

// boltCursor is bbolt's cursor with the end SeekRange sets.
type boltCursor struct {
	*bolt.Cursor
	hi []byte
}

func (c *boltCursor) First() ([]byte, []byte) { c.hi = nil; return c.Cursor.First() }
func (c *boltCursor) Last() ([]byte, []byte)  { c.hi = nil; return c.Cursor.Last() }

func (c *boltCursor) Seek(seek []byte) ([]byte, []byte) { c.hi = nil; return c.Cursor.Seek(seek) }

func (c *boltCursor) SeekRange(lo, hi []byte) ([]byte, []byte) {
	c.hi = hi
	return c.bounded(c.Cursor.Seek(lo))
}

func (c *boltCursor) Next() ([]byte, []byte) { return c.bounded(c.Cursor.Next()) }

func (c *boltCursor) bounded(k, v []byte) ([]byte, []byte) {
	if k != nil && c.hi != nil && bytes.Compare(k, c.hi) >= 0 {
		return nil, nil
	}
	return k, v
}
