package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// pgTx is one transaction on PostgreSQL. Every statement may fail (a lost
// connection, a serialization failure, a write in a read-only
// transaction); the first failure is kept in err, every later operation
// does nothing, and the transaction ends with that error (pgStore.run).
//
// Writes are queued and sent with the next read, in one round trip, or
// with the COMMIT: a decision's transaction reads and writes a few dozen
// keys, and a round trip per write would be a third of its time. A
// write's failure therefore surfaces at the next read or at the commit,
// as the transaction's error. BEGIN is likewise sent with the first
// statement, and COMMIT with the last writes (an expectation that fails
// raises an error there, so the COMMIT after it cannot commit): a write
// transaction costs no round trip of its own.
type pgTx struct {
	ctx  context.Context
	conn *pgx.Conn
	// begin is the BEGIN statement still to send before the first
	// statement; "" once sent.
	begin string
	part  []byte // pgStore.partition
	// got holds what prefetch read, by bucket and key, kept up to date
	// by this transaction's own writes; sums holds the window totals it
	// read, by their ranges, until a write to a spending bucket.
	got  map[string]cachedValue
	sums map[string]int64
	// spans holds the key ranges prefetch read whole (ReadSteps), as the
	// snapshot has them: Get and cursors lay got over them. drawn holds
	// the numbers prefetch drew, by sequence, for counter to hand out.
	spans  []*span
	drawn  map[string][]uint64
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

// errExpectation is the SQLSTATE countersign_expect raises (migration 4).
const errExpectation = "CSX01"

// check is the outcome of queued write w.
func (w pgWrite) check(_ pgconn.CommandTag, err error) error {
	var pe *pgconn.PgError
	if w.mismatch != nil && errors.As(err, &pe) && pe.Code == errExpectation {
		return w.mismatch
	}
	return err
}

func (t *pgTx) bucket(name []byte) kvBucket {
	return pgBucket{t: t, name: string(name), sql: statementsOf(string(name))}
}

func (t *pgTx) shared() bool      { return true }
func (t *pgTx) partition() []byte { return t.part }

// counter is the next value of a PostgreSQL sequence (migrations.go
// creates one per bucket that numbers its keys and per named counter).
// A sequence is not transactional: two transactions never wait for each
// other or conflict on it, and a number taken by one that rolls back is
// never handed out again, so numbers have gaps and, across concurrent
// transactions, need not commit in their order.
func (t *pgTx) counter(name string) (uint64, error) {
	if d := t.drawn[name]; len(d) > 0 {
		t.drawn[name] = d[1:]
		return d[0], nil
	}
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
	t.readAll([]pgRead{{op: op, sql: q, args: args, scan: scan}})
}

// pgRead is one query of readAll.
type pgRead struct {
	op, sql string
	args    []any
	scan    func(pgx.Rows) error
}

// readAll sends the queued writes, then the queries, and hands each
// query's rows to its scan; all in one round trip.
func (t *pgTx) readAll(qs []pgRead) {
	if t.err != nil {
		return
	}
	if t.begin == "" && len(t.writes) == 0 && len(qs) == 1 {
		q := qs[0]
		rows, err := t.conn.Query(t.ctx, q.sql, q.args...)
		if err == nil {
			err = scanAll(rows, q.scan)
		}
		if err != nil {
			t.fail(q.op, err)
		}
		return
	}
	br := t.sendWithWrites(func(b *pgx.Batch) {
		for _, q := range qs {
			b.Queue(q.sql, q.args...)
		}
	})
	defer func() {
		if err := br.Close(); err != nil {
			t.fail("read", err)
		}
	}()
	if t.err != nil {
		return
	}
	for _, q := range qs {
		rows, err := br.Query()
		if err == nil {
			err = scanAll(rows, q.scan)
		}
		if err != nil {
			t.fail(q.op, err)
			return
		}
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

// sendWithWrites sends, in one round trip, the BEGIN still to send, the
// queued writes and then what more queues, and checks the BEGIN and the
// writes (a failure is kept in t.err). The caller reads the results of
// what it queued, unless t.err is set, and closes the results.
func (t *pgTx) sendWithWrites(more func(*pgx.Batch)) pgx.BatchResults {
	var b pgx.Batch
	begin := t.queueBegin(&b)
	for _, w := range t.writes {
		b.Queue(w.sql, w.args...)
	}
	more(&b)
	writes := t.writes
	t.writes = nil
	br := t.conn.SendBatch(t.ctx, &b)
	if begin {
		if _, err := br.Exec(); err != nil {
			t.fail("begin", err)
			return br
		}
	}
	for _, w := range writes {
		if err := w.check(br.Exec()); err != nil {
			t.fail(w.op, err)
			return br
		}
	}
	return br
}

// queueBegin queues the BEGIN first in b if it is still to be sent, and
// says whether it did.
func (t *pgTx) queueBegin(b *pgx.Batch) bool {
	if t.begin == "" {
		return false
	}
	b.Queue(t.begin)
	t.begin = ""
	return true
}

// commit sends the queued writes and the COMMIT, in one round trip, and
// returns the transaction's error. A transaction that sent nothing and
// has nothing to write is done: it never began.
func (t *pgTx) commit() error {
	if t.err != nil {
		return t.err
	}
	if t.begin != "" && len(t.writes) == 0 {
		t.begin = ""
		return nil
	}
	br := t.sendWithWrites(func(b *pgx.Batch) { b.Queue("COMMIT") })
	defer func() {
		if err := br.Close(); err != nil {
			t.fail("commit", err)
		}
	}()
	if t.err != nil {
		return t.err
	}
	tag, err := br.Exec()
	if err == nil && tag.String() != "COMMIT" {
		// PostgreSQL answers COMMIT in a failed transaction with
		// ROLLBACK: whatever failed was reported above.
		err = fmt.Errorf("the transaction ended %s", tag)
	}
	if err != nil {
		return t.fail("commit", err)
	}
	return nil
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
	sql  *bucketSQL
}

// bucketSQL are the statements on one bucket's table, kv_<bucket>
// (migration 3).
type bucketSQL struct {
	table                             string // quoted
	get, put, add, expect, delete, in string
}

// bucketStatements holds a *bucketSQL per bucket name, made once.
var bucketStatements sync.Map

func tableOf(bucket string) string { return pgx.Identifier{"kv_" + bucket}.Sanitize() }

func statementsOf(bucket string) *bucketSQL {
	if s, ok := bucketStatements.Load(bucket); ok {
		return s.(*bucketSQL)
	}
	t := tableOf(bucket)
	s := &bucketSQL{
		table: t,
		get:   `SELECT value FROM ` + t + ` WHERE key = $1`,
		put:   `INSERT INTO ` + t + ` (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = excluded.value`,
		add: `INSERT INTO ` + t + ` (key, value) VALUES ($1, int8send($2::bigint)) ON CONFLICT (key) DO UPDATE
			SET value = int8send(('x' || encode(` + t + `.value, 'hex'))::bit(64)::bigint + $2::bigint)`,
		// The row found stays locked until the transaction ends (DB.UpdateRows).
		expect: `SELECT countersign_expect(count(*)) FROM (SELECT FROM ` + t + ` WHERE key = $1 AND value = $2 FOR SHARE) AS found`,
		delete: `DELETE FROM ` + t + ` WHERE key = $1`,
		in:     `SELECT key, value FROM ` + t + ` WHERE key = ANY($1::bytea[])`,
	}
	actual, _ := bucketStatements.LoadOrStore(bucket, s)
	return actual.(*bucketSQL)
}

func (b pgBucket) Get(key []byte) []byte {
	if c, ok := b.t.got[cacheKey(b.name, key)]; ok {
		return c.value
	}
	if sp := b.t.spanOf(b.name, key, nil); sp != nil {
		return sp.get(key)
	}
	var v []byte
	found := false
	b.t.read("get "+b.name, b.sql.get, []any{key}, func(rows pgx.Rows) error {
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
	b.t.wrote(b.name, key, cachedValue{value: value, known: true})
	return b.t.write("put "+b.name, b.sql.put, key, value)
}

func (b pgBucket) Add(key []byte, delta int64) error {
	b.t.wrote(b.name, key, cachedValue{}) // the sum is PostgreSQL's to compute
	return b.t.write("add to "+b.name, b.sql.add, key, delta)
}

// sumRanges adds the ranges' values up in PostgreSQL: one statement, one
// round trip, and no row sent back.
func (t *pgTx) sumRanges(ranges []keyRange) int64 {
	if total, ok := t.sums[rangesKey(ranges)]; ok {
		return total
	}
	var total int64
	q, args := sumRangesStatement(ranges)
	t.read("sum ranges", q, args, func(rows pgx.Rows) error { return rows.Scan(&total) })
	return total
}

// sumRangesStatement is the statement that adds up the values in ranges,
// with its arguments.
func sumRangesStatement(ranges []keyRange) (string, []any) {
	var q strings.Builder
	args := make([]any, 0, 2*len(ranges))
	q.WriteString(`SELECT coalesce(sum(('x' || encode(substr(value, 1, 8), 'hex'))::bit(64)::bigint), 0)::bigint FROM (`)
	for i, r := range ranges {
		if i > 0 {
			q.WriteString(` UNION ALL `)
		}
		args = append(args, nonNil(r.lo))
		fmt.Fprintf(&q, `SELECT value FROM %s WHERE key >= $%d`, tableOf(string(r.bucket)), len(args))
		if r.hi != nil {
			args = append(args, r.hi)
			fmt.Fprintf(&q, ` AND key < $%d`, len(args))
		}
	}
	q.WriteString(`) r`)
	return q.String(), args
}

// Expect queues a read that must find key holding value: it is sent with
// the writes, in their order, and fails the transaction with mismatch when
// it finds no such row (pgWrite.check).
func (b pgBucket) Expect(key, value []byte, mismatch error) error {
	if b.t.err != nil {
		return b.t.err
	}
	b.t.writes = append(b.t.writes, pgWrite{op: "expect " + b.name,
		sql:  b.sql.expect,
		args: []any{key, nonNil(value)}, mismatch: mismatch})
	return nil
}

func (b pgBucket) Delete(key []byte) error {
	b.t.wrote(b.name, key, cachedValue{known: true})
	return b.t.write("delete "+b.name, b.sql.delete, key)
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
	if !desc && bound != nil && c.hi != nil {
		if sp := c.b.t.spanOf(c.b.name, bound, c.hi); sp != nil {
			c.page = c.b.t.overlay(sp, bound, inclusive, c.hi)
			return
		}
	}
	q := `SELECT key, value FROM ` + c.b.sql.table + ` WHERE true`
	args := []any{c.nextLen}
	if bound != nil {
		args = append(args, bound)
		switch {
		case desc:
			q += ` AND key < $2` // a descending page is never read from an inclusive bound
		case inclusive:
			q += ` AND key >= $2`
		default:
			q += ` AND key > $2`
		}
	}
	if c.hi != nil && !desc {
		args = append(args, c.hi)
		q += fmt.Sprintf(` AND key < $%d`, len(args))
	}
	if desc {
		q += ` ORDER BY key DESC LIMIT $1`
	} else {
		q += ` ORDER BY key LIMIT $1`
	}
	c.page = c.b.t.query("read "+c.b.name, q, args...)
	c.more = len(c.page) == c.nextLen
	c.nextLen = min(2*c.nextLen, maxPage)
}

// cachedValue is a key's value as prefetch read it or this transaction
// then wrote it: known false means it must be read (an Add's outcome).
type cachedValue struct {
	value []byte // nil: absent
	known bool
}

func cacheKey(bucket string, key []byte) string { return bucket + "\x00" + string(key) }

// rangesKey identifies a window total's ranges in sums.
func rangesKey(ranges []keyRange) string {
	var b strings.Builder
	for _, r := range ranges {
		b.Write(r.bucket)
		b.WriteByte(0)
		b.Write(r.lo)
		b.WriteByte(0)
		b.Write(r.hi)
		b.WriteByte(0)
	}
	return b.String()
}

// wrote keeps the prefetched values true to a write: the key's new value,
// or unknown; and a write to a spending bucket drops every window total.
func (t *pgTx) wrote(bucket string, key []byte, c cachedValue) {
	if t.got != nil {
		if c.known {
			t.got[cacheKey(bucket, key)] = c
		} else {
			delete(t.got, cacheKey(bucket, key))
		}
	}
	if t.sums != nil && spendingBucket(bucket) {
		clear(t.sums)
	}
	if !c.known {
		// The value is PostgreSQL's to compute: no span of the bucket
		// can tell it.
		t.spans = slices.DeleteFunc(t.spans, func(sp *span) bool { return sp.bucket == bucket })
	}
}

// prefetch reads every record of reads in one round trip, with the
// queued writes: the point reads in one statement, each window total in
// one more. Get and sumRanges then answer from what it read.
func (t *pgTx) prefetch(reads []Read) {
	if t.err != nil || len(reads) == 0 {
		return
	}
	if t.got == nil {
		t.got, t.sums = map[string]cachedValue{}, map[string]int64{}
	}
	keys := map[string][][]byte{} // by bucket
	var order []string
	var qs []pgRead
	for _, r := range reads {
		if r.draw > 0 {
			qs = append(qs, t.drawQuery(string(r.bucket), r.draw))
			continue
		}
		if r.span != nil {
			if t.spanOf(string(r.span.bucket), r.span.lo, r.span.hi) == nil {
				qs = append(qs, t.spanQuery(*r.span))
			}
			continue
		}
		if r.ranges != nil {
			k := rangesKey(r.ranges)
			q, args := sumRangesStatement(r.ranges)
			qs = append(qs, pgRead{op: "prefetch a window total", sql: q, args: args,
				scan: func(rows pgx.Rows) error {
					var total int64
					err := rows.Scan(&total)
					t.sums[k] = total
					return err
				}})
			continue
		}
		b := string(r.bucket)
		if t.knows(b, r.key) {
			continue
		}
		if _, ok := keys[b]; !ok {
			order = append(order, b)
		}
		keys[b] = append(keys[b], r.key)
		t.got[cacheKey(b, r.key)] = cachedValue{known: true} // absent unless a row comes back
	}
	for _, b := range order {
		qs = append(qs, pgRead{op: "prefetch " + b, sql: statementsOf(b).in, args: []any{keys[b]},
			scan: func(rows pgx.Rows) error {
				var key, value []byte
				if err := rows.Scan(&key, &value); err != nil {
					return err
				}
				if value == nil {
					value = []byte{}
				}
				t.got[cacheKey(b, key)] = cachedValue{value: value, known: true}
				return nil
			}})
	}
	if len(qs) == 0 {
		return // all known
	}
	t.readAll(qs)
	if t.err != nil {
		clear(t.got)
		clear(t.sums)
		t.spans, t.drawn = nil, nil
	}
	t.spans = slices.DeleteFunc(t.spans, func(sp *span) bool { return len(sp.rows) > maxPage })
}

// knows reports whether key of bucket is known without a read: read
// ahead, written, or in a span read whole.
func (t *pgTx) knows(bucket string, key []byte) bool {
	_, ok := t.got[cacheKey(bucket, key)]
	return ok || t.spanOf(bucket, key, nil) != nil
}

func (t *pgTx) held(reads []Read) Held {
	h := Held{got: map[string]cachedValue{}}
	for _, r := range reads {
		switch {
		case r.span != nil:
			if sp := t.spanOf(string(r.span.bucket), r.span.lo, r.span.hi); sp != nil {
				h.spans = append(h.spans, sp)
			}
		case r.ranges == nil && r.draw == 0:
			if c, ok := t.got[cacheKey(string(r.bucket), r.key)]; ok {
				h.got[cacheKey(string(r.bucket), r.key)] = c
			}
		}
	}
	return h
}

func (t *pgTx) assume(h Held) {
	if t.got == nil {
		t.got, t.sums = map[string]cachedValue{}, map[string]int64{}
	}
	for k, c := range h.got {
		t.got[k] = c
	}
	for _, sp := range h.spans {
		t.spans = append(t.spans, &span{bucket: sp.bucket, lo: sp.lo, hi: sp.hi, rows: slices.Clone(sp.rows)})
	}
}

// drawQuery draws n numbers of bucket's sequence for counter.
func (t *pgTx) drawQuery(bucket string, n int) pgRead {
	name := "seq_" + bucket
	return pgRead{op: "draw numbers of " + name, sql: `SELECT nextval($1::regclass) FROM generate_series(1, $2)`,
		args: []any{name, n},
		scan: func(rows pgx.Rows) error {
			var v int64
			if err := rows.Scan(&v); err != nil {
				return err
			}
			if t.drawn == nil {
				t.drawn = map[string][]uint64{}
			}
			t.drawn[name] = append(t.drawn[name], uint64(v))
			return nil
		}}
}

// span is a key range of a bucket that prefetch read whole: rows holds
// its records in key order, as the transaction's snapshot has them.
type span struct {
	bucket string
	lo, hi []byte
	rows   []kvPair
}

// spanQuery reads r whole into a span of t.spans; one holding more than
// maxPage records is then dropped (its reads go to PostgreSQL, as
// without prefetch).
func (t *pgTx) spanQuery(r keyRange) pgRead {
	sp := &span{bucket: string(r.bucket), lo: r.lo, hi: r.hi}
	t.spans = append(t.spans, sp)
	return pgRead{op: "prefetch " + sp.bucket, sql: `SELECT key, value FROM ` + tableOf(sp.bucket) +
		` WHERE key >= $1 AND key < $2 ORDER BY key LIMIT $3`, args: []any{r.lo, r.hi, maxPage + 1},
		scan: func(rows pgx.Rows) error {
			var p kvPair
			if err := rows.Scan(&p.k, &p.v); err != nil {
				return err
			}
			if p.v == nil {
				p.v = []byte{}
			}
			sp.rows = append(sp.rows, p)
			return nil
		}}
}

// spanOf is the span of bucket holding the keys from lo up to hi (nil:
// the key lo alone), or nil.
func (t *pgTx) spanOf(bucket string, lo, hi []byte) *span {
	for _, sp := range t.spans {
		if sp.bucket != bucket || bytes.Compare(lo, sp.lo) < 0 || bytes.Compare(lo, sp.hi) >= 0 {
			continue
		}
		if hi == nil || bytes.Compare(hi, sp.hi) <= 0 {
			return sp
		}
	}
	return nil
}

// get is key's value as the snapshot has it (got, laid over it, is
// looked up first).
func (sp *span) get(key []byte) []byte {
	i, ok := slices.BinarySearchFunc(sp.rows, key, func(p kvPair, k []byte) int { return bytes.Compare(p.k, k) })
	if !ok {
		return nil
	}
	return sp.rows[i].v
}

// overlay is the page of sp's records from bound (inclusive or not) up to
// hi, with this transaction's writes to them laid over: all of them, in
// key order.
func (t *pgTx) overlay(sp *span, bound []byte, inclusive bool, hi []byte) []kvPair {
	in := func(k []byte) bool {
		c := bytes.Compare(k, bound)
		return (c > 0 || (c == 0 && inclusive)) && bytes.Compare(k, hi) < 0
	}
	merged := map[string][]byte{}
	for _, p := range sp.rows {
		if in(p.k) {
			merged[string(p.k)] = p.v
		}
	}
	prefix := sp.bucket + "\x00"
	for ck, c := range t.got {
		k, ok := strings.CutPrefix(ck, prefix)
		if !ok || !in([]byte(k)) {
			continue
		}
		if c.value == nil {
			delete(merged, k)
		} else {
			merged[k] = c.value
		}
	}
	page := make([]kvPair, 0, len(merged))
	for k, v := range merged {
		page = append(page, kvPair{k: []byte(k), v: v})
	}
	slices.SortFunc(page, func(a, b kvPair) int { return bytes.Compare(a.k, b.k) })
	return page
}
