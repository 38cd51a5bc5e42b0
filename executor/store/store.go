package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
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
		bModes, bBreakers, bRejections, bWorkflowsBySeq, bWorkflowsByUser, bCredentialKeys, bLeases, bFences, bAlerts, bPageSessions,
		bOrderRefunds, bAuditPending, bAuditCheckpoints, bAuditKeys}
)

// DB is an open store, on bbolt (Open) or PostgreSQL (OpenPostgres).
type DB struct {
	kv backend
}

// Close waits for the writes already queued by Batch, then releases the
// file or the connections.
func (db *DB) Close() error {
	return db.kv.close()
}

// Commits counts committed write transactions: the difference of two
// readings is the number of commits between them. On bbolt it is the id
// of the last committed write transaction, which bbolt raises by one on
// every commit and never otherwise; with the default options each commit
// is two fdatasyncs, and `countersign bench` counts its fsyncs this way.
// On PostgreSQL it is the number of write transactions this DB committed
// since it was opened (other processes' commits are not counted).
func (db *DB) Commits() (uint64, error) {
	return db.kv.commits()
}

// Retries counts the write attempts this DB ran again after a
// serialization conflict or a deadlock (PostgreSQL); always 0 on bbolt,
// which has one writer at a time. `countersign bench --store` reports it.
func (db *DB) Retries() uint64 {
	if s, ok := db.kv.(*pgStore); ok {
		return s.retried.Load()
	}
	return 0
}

// Shared reports whether other processes may use the same store at once:
// true on PostgreSQL, false on bbolt, whose file one process holds.
func (db *DB) Shared() bool {
	_, ok := db.kv.(*pgStore)
	return ok
}

// Tx is one transaction. Its methods are valid only inside the function
// given to Update, Batch or View.
type Tx struct {
	kv kvTx
}

// Update runs fn in a write transaction: everything fn writes commits
// together, durably, or not at all. Keep network calls out of fn: bbolt has
// one writer at a time.
//
// fn may run more than once. On PostgreSQL a write transaction runs
// SERIALIZABLE, and one that loses a conflict with a concurrent writer (in
// this process or another) is rolled back and fn runs again from the
// start. So fn must compute everything from tx, set every outcome it hands
// back afresh at its top (never append to or add to what a previous run
// left), and have no effect outside the transaction before Update returns
// nil. Batch has the same rule.
func (db *DB) Update(fn func(*Tx) error) error {
	return db.kv.update(func(k kvTx) error { return fn(&Tx{kv: k}) })
}

// UpdateRows is Update for a transaction that writes every row whose
// change would make it wrong: a workflow's lease and fencing number, the
// audit sequencer's lease with the records it chains, a step's recorded
// outcome (engine recordTx). On PostgreSQL it
// runs REPEATABLE READ: two such transactions that write the same row
// still conflict (one runs again), but its reads take no predicate locks,
// so it never makes a decision run again for touching the same index page.
// What must not race a lease, a write checked against the fencing number
// (Tx.CheckFence), holds the fence row locked until it commits, so a lease
// taken over meanwhile waits for that write, or that write sees it and
// fails. On bbolt it is Update.
func (db *DB) UpdateRows(fn func(*Tx) error) error {
	return db.kv.updateRows(func(k kvTx) error { return fn(&Tx{kv: k}) })
}

// View runs fn in a read-only transaction over a consistent snapshot. It
// runs fn once.
func (db *DB) View(fn func(*Tx) error) error {
	return db.kv.view(func(k kvTx) error { return fn(&Tx{kv: k}) })
}

func (t *Tx) bucket(name []byte) kvBucket { return t.kv.bucket(name) }

// getJSON decodes the value at key into v, copying out of the transaction.
func (t *Tx) getJSON(bucket, key []byte, v any) error {
	raw := t.bucket(bucket).Get(key)
	if raw == nil {
		return ErrNotFound
	}
	return decodeJSON(bucket, key, raw, v)
}

// decodeJSON decodes raw, the value at key, into v.
func decodeJSON(bucket, key, raw []byte, v any) error {
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("decode %s/%q: %w", bucket, key, err)
	}
	return nil
}

// prefixEnd is the first key after every key that starts with prefix
// (nil when there is none), for a Range over a prefix.
func prefixEnd(prefix []byte) []byte {
	end := bytes.Clone(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
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

// nextSeq returns the next value of a named counter: a key of the meta
// bucket on bbolt, a sequence on PostgreSQL (pgTx.counter).
func (t *Tx) nextSeq(name string) (uint64, error) {
	return t.kv.counter(name)
}

// Shared reports whether other processes may write the same store at
// once (DB.Shared), for a writer whose records differ on a fleet (the
// audit log's).
func (t *Tx) Shared() bool { return t.kv.shared() }

// Meta returns a copy of the value other packages keep under name in the
// meta bucket (the audit sequencer's lease), or nil.
func (t *Tx) Meta(name string) []byte {
	return bytes.Clone(t.bucket(bMeta).Get([]byte("x:" + name)))
}

// PutMeta keeps value under name in the meta bucket. Names are kept apart
// from the store's own keys there.
func (t *Tx) PutMeta(name string, value []byte) error {
	return t.bucket(bMeta).Put([]byte("x:"+name), bytes.Clone(value))
}
