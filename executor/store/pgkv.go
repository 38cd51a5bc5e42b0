package store

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// pgTx is one transaction on PostgreSQL. Every statement may fail (a lost
// connection, a serialization failure, a write in a read-only
// transaction); the first failure is kept in err, every later operation
// does nothing, and the transaction ends with that error (pgStore.run).
//
// Writes are queued and sent with the next read, in one round trip, or by
// flush before the commit: a decision's transaction reads and writes a
// few dozen keys, and a round trip per write would be a third of its
// time. A write's failure therefore surfaces at the next read or at the
// commit, as the transaction's error.
type pgTx struct {
	ctx    context.Context
	tx     pgx.Tx
	part   []byte // pgStore.partition
	err    error
	writes []pgWrite
}

// pgWrite is a queued write: op names it in an error. A write with a
// mismatch is an expectation (Expect): a SELECT that must find one row,
// else the transaction fails with mismatch.
type pgWrite struct {
	op, sql  string
	args     []any
	mismatch error
}

// check is the outcome of queued write w, whose statement answered tag.
func (w pgWrite) check(tag pgconn.CommandTag, err error) error {
	if err == nil && w.mismatch != nil && tag.RowsAffected() != 1 {
		return w.mismatch
	}
	return err
}

func (t *pgTx) bucket(name []byte) kvBucket { return pgBucket{t: t, name: string(name)} }

func (t *pgTx) shared() bool      { return true }
func (t *pgTx) partition() []byte { return t.part }

// counter is the next value of a PostgreSQL sequence (migrations.go
// creates one per bucket that numbers its keys and per named counter).
// A sequence is not transactional: two transactions never wait for each
// other or conflict on it, and a number taken by one that rolls back is
// never handed out again, so numbers have gaps and, across concurrent
// transactions, need not commit in their order.
func (t *pgTx) counter(name string) (uint64, error) {
	var n int64
	t.read("next value of "+name, `SELECT nextval($1::regclass)`, []any{name},
		func(rows pgx.Rows) error { return rows.Scan(&n) })
	if t.err != nil {
		return 0, t.err
	}
	return uint64(n), nil
}

// fail keeps the first error of the transaction and returns it.
func (t *pgTx) fail(op string, err error) error {
	if t.err == nil {
		t.err = fmt.Errorf("store on PostgreSQL: %s: %w", op, err)
	}
	return t.err
}

// write queues a write.
func (t *pgTx) write(op, sql string, args ...any) error {
	if t.err != nil {
		return t.err
	}
	t.writes = append(t.writes, pgWrite{op: op, sql: sql, args: args})
	return nil
}

// read sends the queued writes, then q, and hands q's rows to scan; all
// in one round trip.
func (t *pgTx) read(op, q string, args []any, scan func(pgx.Rows) error) {
	if t.err != nil {
		return
	}
	if len(t.writes) == 0 {
		rows, err := t.tx.Query(t.ctx, q, args...)
		if err == nil {
			err = scanAll(rows, scan)
		}
		if err != nil {
			t.fail(op, err)
		}
		return
	}
	var b pgx.Batch
	for _, w := range t.writes {
		b.Queue(w.sql, w.args...)
	}
	b.Queue(q, args...)
	writes := t.writes
	t.writes = nil
	br := t.tx.SendBatch(t.ctx, &b)
	defer func() {
		if err := br.Close(); err != nil {
			t.fail(op, err)
		}
	}()
	for _, w := range writes {
		if err := w.check(br.Exec()); err != nil {
			t.fail(w.op, err)
			return
		}
	}
	rows, err := br.Query()
	if err == nil {
		err = scanAll(rows, scan)
	}
	if err != nil {
		t.fail(op, err)
	}
}

// scanAll hands every row to scan and closes rows.
func scanAll(rows pgx.Rows, scan func(pgx.Rows) error) error {
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// flush sends the queued writes and returns the transaction's error.
func (t *pgTx) flush() error {
	if t.err != nil || len(t.writes) == 0 {
		return t.err
	}
	var b pgx.Batch
	for _, w := range t.writes {
		b.Queue(w.sql, w.args...)
	}
	writes := t.writes
	t.writes = nil
	br := t.tx.SendBatch(t.ctx, &b)
	for _, w := range writes {
		if err := w.check(br.Exec()); err != nil {
			t.fail(w.op, err)
			break
		}
	}
	if err := br.Close(); err != nil {
		t.fail("write", err)
	}
	return t.err
}

// query reads all the key-value rows q returns; nil after a failure,
// which it keeps.
func (t *pgTx) query(op, q string, args ...any) []kvPair {
	var page []kvPair
	t.read(op, q, args, func(rows pgx.Rows) error {
		var p kvPair
		if err := rows.Scan(&p.k, &p.v); err != nil {
			return err
		}
		page = append(page, p)
		return nil
	})
	if t.err != nil {
		return nil
	}
	return page
}

// pgBucket is one bucket: the rows of kv with that bucket name.
type pgBucket struct {
	t    *pgTx
	name string
}

func (b pgBucket) Get(key []byte) []byte {
	var v []byte
	found := false
	b.t.read("get "+b.name, `SELECT value FROM kv WHERE bucket = $1 AND key = $2`, []any{b.name, key}, func(rows pgx.Rows) error {
		found = true
		return rows.Scan(&v)
	})
	if !found || b.t.err != nil {
		return nil
	}
	if v == nil {
		v = []byte{} // present but empty, as bbolt tells it from absent
	}
	return v
}

func (b pgBucket) Put(key, value []byte) error {
	if value == nil {
		value = []byte{} // a nil []byte would be NULL
	}
	return b.t.write("put "+b.name, `INSERT INTO kv (bucket, key, value) VALUES ($1, $2, $3)
		ON CONFLICT (bucket, key) DO UPDATE SET value = excluded.value`, b.name, key, value)
}

func (b pgBucket) Add(key []byte, delta int64) error {
	return b.t.write("add to "+b.name, `INSERT INTO kv (bucket, key, value) VALUES ($1, $2, int8send($3::bigint))
		ON CONFLICT (bucket, key) DO UPDATE
		SET value = int8send(('x' || encode(kv.value, 'hex'))::bit(64)::bigint + $3::bigint)`, b.name, key, delta)
}

// sumRanges adds the ranges' values up in PostgreSQL: one statement, one
// round trip, and no row sent back.
func (t *pgTx) sumRanges(ranges []keyRange) int64 {
	var q strings.Builder
	args := make([]any, 0, 3*len(ranges))
	q.WriteString(`SELECT coalesce(sum(('x' || encode(substr(value, 1, 8), 'hex'))::bit(64)::bigint), 0)::bigint FROM (`)
	for i, r := range ranges {
		if i > 0 {
			q.WriteString(` UNION ALL `)
		}
		args = append(args, string(r.bucket), nonNil(r.lo))
		fmt.Fprintf(&q, `SELECT value FROM kv WHERE bucket = $%d AND key >= $%d`, len(args)-1, len(args))
		if r.hi != nil {
			args = append(args, r.hi)
			fmt.Fprintf(&q, ` AND key < $%d`, len(args))
		}
	}
	q.WriteString(`) r`)
	var total int64
	t.read("sum ranges", q.String(), args, func(rows pgx.Rows) error { return rows.Scan(&total) })
	return total
}

// Expect queues a read that must find key holding value: it is sent with
// the writes, in their order, and fails the transaction with mismatch when
// it finds no such row (pgWrite.check).
func (b pgBucket) Expect(key, value []byte, mismatch error) error {
	if b.t.err != nil {
		return b.t.err
	}
	b.t.writes = append(b.t.writes, pgWrite{op: "expect " + b.name,
		sql:  `SELECT 1 FROM kv WHERE bucket = $1 AND key = $2 AND value = $3`,
		args: []any{b.name, key, nonNil(value)}, mismatch: mismatch})
	return nil
}

func (b pgBucket) Delete(key []byte) error {
	return b.t.write("delete "+b.name, `DELETE FROM kv WHERE bucket = $1 AND key = $2`, b.name, key)
}

// NextSequence is the bucket's sequence (pgTx.counter).
func (b pgBucket) NextSequence() (uint64, error) {
	return b.t.counter("seq_" + b.name)
}

// ForEach walks the bucket a page of maxPage keys at a time.
func (b pgBucket) ForEach(fn func(k, v []byte) error) error {
	if err := walk(b, []byte{}, nil, fn); err != nil {
		return err
	}
	return b.t.err
}

func (b pgBucket) Cursor() kvCursor { return &pgCursor{b: b} }

// Pages of a cursor: the first read after a jump is small (a seek often
// wants one key or a few), and each further page in the same direction
// doubles, so a long walk costs few round trips. A walk begun by
// SeekRange reads maxPage keys at a time from the start: its caller means
// to walk, and the end bounds what it reads.
const (
	firstPage = 4
	maxPage   = 256
)

type kvPair struct{ k, v []byte }

// pgCursor pages through a bucket's keys in order. It holds the page it
// last read, in the direction it read it, and where it stands in it. Each
// page is read whole before the cursor returns a key of it, so the caller
// may query the transaction between two moves (a connection cannot while
// rows are still open on it).
type pgCursor struct {
	b       pgBucket
	page    []kvPair
	i       int    // position in page; len(page) when past its end
	desc    bool   // page is in descending key order
	more    bool   // the bucket may hold keys beyond page in its direction
	hi      []byte // where Next stops, after SeekRange
	nextLen int
}

func (c *pgCursor) First() ([]byte, []byte) { return c.jump(false, nil, nil, firstPage) }
func (c *pgCursor) Last() ([]byte, []byte)  { return c.jump(true, nil, nil, firstPage) }

func (c *pgCursor) Seek(seek []byte) ([]byte, []byte) {
	return c.jump(false, nonNil(seek), nil, firstPage)
}

func (c *pgCursor) SeekRange(lo, hi []byte) ([]byte, []byte) {
	return c.jump(false, nonNil(lo), hi, maxPage)
}

func (c *pgCursor) Next() ([]byte, []byte) { return c.step(false) }
func (c *pgCursor) Prev() ([]byte, []byte) { return c.step(true) }

// nonNil is b, or an empty key for nil: a bound from the first key.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// jump reads a first page of n keys from bound inclusive (nil: from the
// end of that direction), up to hi.
func (c *pgCursor) jump(desc bool, bound, hi []byte, n int) ([]byte, []byte) {
	c.hi, c.nextLen = hi, n
	c.read(desc, bound, true)
	return c.current()
}

// step moves one key in a direction: within the page when it can, else
// by reading the next page beyond the current key.
func (c *pgCursor) step(desc bool) ([]byte, []byte) {
	if c.i >= len(c.page) {
		return nil, nil // past an end, or never placed
	}
	if desc == c.desc {
		c.i++
		if c.i < len(c.page) || !c.more {
			return c.current()
		}
		c.read(desc, c.page[len(c.page)-1].k, false)
		return c.current()
	}
	// Turning back: the key on the other side of the current one.
	c.nextLen = firstPage
	c.read(desc, c.page[c.i].k, false)
	return c.current()
}

func (c *pgCursor) current() ([]byte, []byte) {
	if c.i >= len(c.page) {
		return nil, nil
	}
	return c.page[c.i].k, c.page[c.i].v
}

// read replaces the page with up to nextLen keys from bound (nil: from
// the end), inclusive or not, in a direction, ascending ones before hi;
// it doubles nextLen for the page after it.
func (c *pgCursor) read(desc bool, bound []byte, inclusive bool) {
	c.page, c.i, c.desc, c.more = nil, 0, desc, false
	q := `SELECT key, value FROM kv WHERE bucket = $1`
	args := []any{c.b.name, c.nextLen}
	if bound != nil {
		args = append(args, bound)
		switch {
		case desc:
			q += ` AND key < $3` // a descending page is never read from an inclusive bound
		case inclusive:
			q += ` AND key >= $3`
		default:
			q += ` AND key > $3`
		}
	}
	if c.hi != nil && !desc {
		args = append(args, c.hi)
		q += fmt.Sprintf(` AND key < $%d`, len(args))
	}
	if desc {
		q += ` ORDER BY key DESC LIMIT $2`
	} else {
		q += ` ORDER BY key LIMIT $2`
	}
	c.page = c.b.t.query("read "+c.b.name, q, args...)
	c.more = len(c.page) == c.nextLen
	c.nextLen = min(2*c.nextLen, maxPage)
}
