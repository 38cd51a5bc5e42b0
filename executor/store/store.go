package store

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/countersign/countersign/executor/groupcommit"
	berrors "go.etcd.io/bbolt/errors"
)

// Bucket names. Keys are documented beside each accessor.
var (
	bWorkflows   = []byte("workflows")
	bSteps       = []byte("steps")
	bCalls       = []byte("calls")
	bApprovals   = []byte("approvals")
	bSwitches    = []byte("switches")
	bDecisions   = []byte("decisions")
	bDecisionsWF = []byte("decisions_by_workflow")
	bOrderSpent  = []byte("spent_by_order")
	bRepSpent    = []byte("spent_by_rep")
	bAgentSpent  = []byte("spent_by_agent")
	bBundles     = []byte("bundles")
	bBlobs       = []byte("bundle_blobs")
	bMeta        = []byte("meta")
	allBuckets   = [][]byte{bWorkflows, bSteps, bCalls, bApprovals, bSwitches, bDecisions, bDecisionsWF,
		bOrderSpent, bRepSpent, bAgentSpent, bRepSpentSums, bAgentSpentSums, bOrderReships, bBundles, bBlobs, bMeta, bAudit,
		bModes, bBreakers, bRejections}
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
}

// DB is an open store.
type DB struct {
	bolt  *bolt.DB
	group *groupcommit.Group
}

// Open opens (creating if needed) the store at path.
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
		tx := &Tx{tx: btx}
		if err := tx.openWorkflowIndex(); err != nil {
			return err
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
	return &DB{bolt: b, group: groupcommit.New(b, opts.MaxBatch)}, nil
}

// classifyOpen adds ErrUnwritable to an error that a person fixes by
// choosing another directory, keeping the cause.
func classifyOpen(err error) error {
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EROFS) {
		return fmt.Errorf("%w: %w", ErrUnwritable, err)
	}
	return err
}

// Close waits for the writes already queued by Batch, then
// releases the file.
func (db *DB) Close() error {
	db.group.Flush()
	return db.bolt.Close()
}

// Commits returns the id of the last committed write transaction. bbolt
// raises it by one on every commit and never otherwise, so the difference
// of two readings is the number of commits between them; with the default
// options each commit is two fdatasyncs. `countersign bench` counts its
// fsyncs this way.
func (db *DB) Commits() (uint64, error) {
	var id int
	err := db.bolt.View(func(tx *bolt.Tx) error { id = tx.ID(); return nil })
	return uint64(id), err
}

// Tx is one transaction. Its methods are valid only inside the function
// given to Update or View.
type Tx struct {
	tx *bolt.Tx
}

// Update runs fn in a write transaction: everything fn writes commits
// together, durably, or not at all. Keep network calls out of fn: bbolt has
// one writer at a time.
func (db *DB) Update(fn func(*Tx) error) error {
	return db.bolt.Update(func(tx *bolt.Tx) error { return fn(&Tx{tx: tx}) })
}

// View runs fn in a read-only transaction over a consistent snapshot.
func (db *DB) View(fn func(*Tx) error) error {
	return db.bolt.View(func(tx *bolt.Tx) error { return fn(&Tx{tx: tx}) })
}

func (t *Tx) bucket(name []byte) *bolt.Bucket { return t.tx.Bucket(name) }

// getJSON decodes the value at key into v, copying out of the transaction.
func (t *Tx) getJSON(bucket, key []byte, v any) error {
	raw := t.bucket(bucket).Get(key)
	if raw == nil {
		return ErrNotFound
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("decode %s/%q: %w", bucket, key, err)
	}
	return nil
}

func (t *Tx) putJSON(bucket, key []byte, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s/%q: %w", bucket, key, err)
	}
	return t.bucket(bucket).Put(key, raw)
}

func u64(n uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, n)
	return b
}

// nextSeq returns the next value of a named counter in the meta bucket.
func (t *Tx) nextSeq(name string) (uint64, error) {
	m := t.bucket(bMeta)
	var n uint64
	if raw := m.Get([]byte(name)); raw != nil {
		n = binary.BigEndian.Uint64(raw)
	}
	n++
	return n, m.Put([]byte(name), u64(n))
}
