package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// pgTx is one transaction on PostgreSQL. Every statement may fail (a lost
// connection, a serialization failure, a write in a read-only
// transaction); the first failure is kept in err, every later operation
// does nothing, and the transaction ends with that error (pgStore.run).
type pgTx struct {
	ctx context.Context
	tx  pgx.Tx
	err error
}

func (t *pgTx) bucket(name []byte) kvBucket { return pgBucket{t: t, name: string(name)} }

// fail keeps the first error of the transaction and returns it.
func (t *pgTx) fail(op string, err error) error {
	if t.err == nil {
		t.err = fmt.Errorf("store on PostgreSQL: %s: %w", op, err)
	}
	return t.err
}

// query reads all the key-value rows q returns; nil after a failure,
// which it keeps.
func (t *pgTx) query(op, q string, args ...any) []kvPair {
	if t.err != nil {
		return nil
	}
	rows, err := t.tx.Query(t.ctx, q, args...)
	if err != nil {
		t.fail(op, err)
		return nil
	}
	defer rows.Close()
	var page []kvPair
	for rows.Next() {
		var p kvPair
		if err := rows.Scan(&p.k, &p.v); err != nil {
			t.fail(op, err)
			return nil
		}
		page = append(page, p)
	}
	if err := rows.Err(); err != nil {
		t.fail(op, err)
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
	if b.t.err != nil {
		return nil
	}
	var v []byte
	err := b.t.tx.QueryRow(b.t.ctx, `SELECT value FROM kv WHERE bucket = $1 AND key = $2`, b.name, key).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		b.t.fail("get "+b.name, err)
		return nil
	}
	if v == nil {
		v = []byte{} // present but empty, as bbolt tells it from absent
	}
	return v
}

func (b pgBucket) Put(key, value []byte) error {
	if b.t.err != nil {
		return b.t.err
	}
	if value == nil {
		value = []byte{} // a nil []byte would be NULL
	}
	_, err := b.t.tx.Exec(b.t.ctx, `INSERT INTO kv (bucket, key, value) VALUES ($1, $2, $3)
		ON CONFLICT (bucket, key) DO UPDATE SET value = excluded.value`, b.name, key, value)
	if err != nil {
		return b.t.fail("put "+b.name, err)
	}
	return nil
}

func (b pgBucket) Delete(key []byte) error {
	if b.t.err != nil {
		return b.t.err
	}
	if _, err := b.t.tx.Exec(b.t.ctx, `DELETE FROM kv WHERE bucket = $1 AND key = $2`, b.name, key); err != nil {
		return b.t.fail("delete "+b.name, err)
	}
	return nil
}

func (b pgBucket) NextSequence() (uint64, error) {
	if b.t.err != nil {
		return 0, b.t.err
	}
	var n int64
	err := b.t.tx.QueryRow(b.t.ctx, `INSERT INTO kv_sequences (bucket, value) VALUES ($1, 1)
		ON CONFLICT (bucket) DO UPDATE SET value = kv_sequences.value + 1 RETURNING value`, b.name).Scan(&n)
	if err != nil {
		return 0, b.t.fail("next sequence of "+b.name, err)
	}
	return uint64(n), nil
}

func (b pgBucket) ForEach(fn func(k, v []byte) error) error {
	c := b.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if err := fn(k, v); err != nil {
			return err
		}
	}
	return b.t.err
}

func (b pgBucket) Cursor() kvCursor { return &pgCursor{b: b} }

// Range reads pages of maxPage keys, each whole before fn sees any of it:
// fn may query the transaction, which a connection cannot do while rows
// are still open on it.
func (b pgBucket) Range(lo, hi []byte, fn func(k, v []byte) error) error {
	if lo == nil {
		lo = []byte{}
	}
	q := `SELECT key, value FROM kv WHERE bucket = $1 AND key >= $3 AND key < $4 ORDER BY key LIMIT $2`
	args := []any{b.name, maxPage, lo, hi}
	if hi == nil {
		q, args = `SELECT key, value FROM kv WHERE bucket = $1 AND key >= $3 ORDER BY key LIMIT $2`, args[:3]
	}
	for {
		page := b.t.query("read "+b.name, q, args...)
		for _, p := range page {
			if err := fn(p.k, p.v); err != nil {
				return err
			}
		}
		if len(page) < maxPage {
			return b.t.err
		}
		// The rest: after the last key read.
		q = strings.Replace(q, "key >= $3", "key > $3", 1)
		args[2] = page[len(page)-1].k
	}
}

// Pages of a cursor: the first read after a jump is small (a seek often
// wants one key or a few), and each further page in the same direction
// doubles, so a long walk costs few round trips.
const (
	firstPage = 4
	maxPage   = 256
)

type kvPair struct{ k, v []byte }

// pgCursor pages through a bucket's keys in order. It holds the page it
// last read, in the direction it read it, and where it stands in it.
type pgCursor struct {
	b       pgBucket
	page    []kvPair
	i       int  // position in page; len(page) when past its end
	desc    bool // page is in descending key order
	more    bool // the bucket may hold keys beyond page in its direction
	nextLen int
}

func (c *pgCursor) First() ([]byte, []byte) { return c.jump(false, nil, true) }
func (c *pgCursor) Last() ([]byte, []byte)  { return c.jump(true, nil, true) }

func (c *pgCursor) Seek(seek []byte) ([]byte, []byte) {
	if seek == nil {
		seek = []byte{}
	}
	return c.jump(false, seek, true)
}

func (c *pgCursor) Next() ([]byte, []byte) { return c.step(false) }
func (c *pgCursor) Prev() ([]byte, []byte) { return c.step(true) }

// jump reads a first page from bound (nil: from the end of that
// direction), inclusive or not.
func (c *pgCursor) jump(desc bool, bound []byte, inclusive bool) ([]byte, []byte) {
	c.nextLen = firstPage
	c.read(desc, bound, inclusive)
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

// Queries of read, by direction and bound.
var cursorQueries = map[[3]bool]string{ // desc, bounded, inclusive
	{false, false, false}: `SELECT key, value FROM kv WHERE bucket = $1 ORDER BY key LIMIT $2`,
	{true, false, false}:  `SELECT key, value FROM kv WHERE bucket = $1 ORDER BY key DESC LIMIT $2`,
	{false, true, true}:   `SELECT key, value FROM kv WHERE bucket = $1 AND key >= $3 ORDER BY key LIMIT $2`,
	{false, true, false}:  `SELECT key, value FROM kv WHERE bucket = $1 AND key > $3 ORDER BY key LIMIT $2`,
	{true, true, false}:   `SELECT key, value FROM kv WHERE bucket = $1 AND key < $3 ORDER BY key DESC LIMIT $2`,
}

// read replaces the page with up to nextLen keys from bound in a
// direction, and doubles nextLen for the page after it.
func (c *pgCursor) read(desc bool, bound []byte, inclusive bool) {
	c.page, c.i, c.desc, c.more = nil, 0, desc, false
	t := c.b.t
	if t.err != nil {
		return
	}
	q := cursorQueries[[3]bool{desc, bound != nil, bound != nil && inclusive}]
	args := []any{c.b.name, c.nextLen}
	if bound != nil {
		args = append(args, bound)
	}
	c.page = t.query("read "+c.b.name, q, args...)
	c.more = len(c.page) == c.nextLen
	c.nextLen = min(2*c.nextLen, maxPage)
}
