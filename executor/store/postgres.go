package store

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PostgresOptions tune OpenPostgres. The zero value is what production
// uses. The pool itself is tuned by the URL (pool_max_conns, ...), as
// pgxpool reads it.
type PostgresOptions struct {
	// MaxAttempts is how many times a write transaction runs before a
	// serialization conflict or a deadlock is returned (ErrConflict).
	// Default 50: under heavy contention on one total every writer but
	// one loses each round, and a loser waits a random, growing pause.
	MaxAttempts int
	// TxTimeout bounds one attempt of a write transaction, its
	// statements and its commit, so that a write never holds its locks
	// for long. Default 30s. A read is not bounded: it holds no lock, and
	// a whole-log read (audit verification, reconciliation) may take
	// longer.
	TxTimeout time.Duration
}

// OpenPostgres opens the store in the PostgreSQL database at url (a
// postgres:// URL or a key=value connection string), creating or
// migrating its schema first (migrations.go).
func OpenPostgres(ctx context.Context, url string, opts PostgresOptions) (*DB, error) {
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 50
	}
	if opts.TxTimeout <= 0 {
		opts.TxTimeout = 30 * time.Second
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgconn's message hides the password.
		return nil, fmt.Errorf("open store on PostgreSQL: %w", err)
	}
	// Every statement of the store reads by key or by key range, so the
	// primary key's index is always the plan. On a small table the planner
	// would rather scan it whole, and under SERIALIZABLE a whole-table
	// scan watches the whole table: every concurrent write would then
	// conflict with it (measured: a retry for most steps of a single
	// agent on a fresh database).
	cfg.ConnConfig.RuntimeParams["enable_seqscan"] = "off"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open store on PostgreSQL: %w", err)
	}
	if err := migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open store on PostgreSQL %s/%s: %w", cfg.ConnConfig.Host, cfg.ConnConfig.Database, err)
	}
	part := make([]byte, 8)
	_, _ = crand.Read(part) // never fails (crypto/rand)
	db := &DB{kv: &pgStore{pool: pool, opts: opts, pending: map[chan struct{}]bool{}, partition: part}}
	if err := db.buildOrderRefunds(); err != nil {
		db.Close()
		return nil, fmt.Errorf("open store on PostgreSQL %s/%s: %w", cfg.ConnConfig.Host, cfg.ConnConfig.Database, err)
	}
	return db, nil
}

// pgStore is the PostgreSQL backend: every transaction is one PostgreSQL
// transaction on a pooled connection.
type pgStore struct {
	pool *pgxpool.Pool
	opts PostgresOptions

	lanes [64]sync.Mutex // batchIn's lanes, by a hash of their names
	// partition is this open's rows of the running sums (spent.go):
	// random, so that no two sidecars (nor two starts of one) write the
	// same sum.
	partition []byte
	committed atomic.Uint64
	// retried counts attempts run again after a conflict (DB.Retries).
	retried atomic.Uint64

	mu      sync.Mutex
	pending map[chan struct{}]bool // closed when an enqueued write has its outcome
	closed  bool
}

var _ backend = (*pgStore)(nil)

// update runs fn SERIALIZABLE, again from the start after a
// serialization failure or a deadlock, until it commits, fails otherwise,
// or MaxAttempts is reached. SERIALIZABLE makes PostgreSQL detect the
// read-then-write races between writers (two decisions each reading the
// headroom the other then spends) without the accessors naming the rows to
// lock.
func (s *pgStore) update(fn func(kvTx) error) error { return s.updateIn(nil, serializable, fn) }

// updateRows is update at REPEATABLE READ (DB.UpdateRows).
func (s *pgStore) updateRows(fn func(kvTx) error) error {
	return s.updateIn(nil, "BEGIN ISOLATION LEVEL REPEATABLE READ", fn)
}

// serializable begins a write transaction (write).
const serializable = "BEGIN ISOLATION LEVEL SERIALIZABLE"

// updateIn is update with each attempt run holding lane (nil: none), from
// begin: an attempt that lost waits its backoff out without it.
func (s *pgStore) updateIn(lane *sync.Mutex, begin string, fn func(kvTx) error) error {
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), s.opts.TxTimeout)
		if lane != nil {
			lane.Lock()
		}
		err := s.run(ctx, begin, fn)
		if lane != nil {
			lane.Unlock()
		}
		cancel()
		if err == nil {
			s.committed.Add(1)
			return nil
		}
		if !conflict(err) {
			return err
		}
		if attempt == s.opts.MaxAttempts {
			return fmt.Errorf("%w: gave up after %d attempts: %w", ErrConflict, attempt, err)
		}
		s.retried.Add(1)
		time.Sleep(backoff(attempt))
	}
}

// backoff is a random pause in [d/2, d), d doubling from 1ms to 64ms, so
// that the writers that lost one round do not all meet again in the next.
func backoff(attempt int) time.Duration {
	d := time.Millisecond << min(attempt-1, 6)
	return d/2 + rand.N(d/2)
}

// unreachable marks err ErrUnavailable unless PostgreSQL itself answered
// it: any error that is not a *pgconn.PgError comes from the connection
// (refused, broken, timed out), not from the statement.
func unreachable(err error) error {
	var pe *pgconn.PgError
	if err == nil || errors.As(err, &pe) || errors.Is(err, ErrUnavailable) || errors.Is(err, ErrFenced) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// conflict reports whether err is PostgreSQL refusing a transaction that
// would run again fine: a serialization failure or a deadlock.
func conflict(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// view runs fn in a REPEATABLE READ, READ ONLY transaction: one snapshot
// for all its reads, which never fails to serialize.
func (s *pgStore) view(fn func(kvTx) error) error {
	return s.run(context.Background(), "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", fn)
}

// run is one attempt: fn, then commit, on a pooled connection; the BEGIN
// rides with the first statement and the COMMIT with the last writes. The
// first failed statement is the outcome whatever fn returned, as fn may
// have decided on a nil the failed read returned. A connection left in
// doubt (a transaction that may still be open) is closed, not pooled.
func (s *pgStore) run(ctx context.Context, begin string, fn func(kvTx) error) error {
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return unreachable(fmt.Errorf("acquire a connection: %w", err))
	}
	defer pc.Release()
	t := &pgTx{ctx: ctx, conn: pc.Conn(), begin: begin, part: s.partition}
	ferr := fn(t)
	if ferr == nil {
		t.commit() // a read-only transaction refuses queued writes here
	}
	if t.err != nil || ferr != nil {
		t.rollback()
	}
	if t.err != nil {
		return unreachable(t.err)
	}
	return ferr
}

// rollback ends a transaction that failed or that fn gave up, if it
// began; a connection it cannot roll back is closed.
func (t *pgTx) rollback() {
	if t.begin != "" {
		return // never began
	}
	if _, err := t.conn.Exec(context.Background(), "ROLLBACK"); err != nil {
		t.conn.Close(context.Background())
	}
}

// batch is update: PostgreSQL shares WAL flushes between concurrent
// commits itself, so one transaction per function costs no extra flush
// under load, and keeps a conflict to the one function that met it. As
// on bbolt's group commit, a panic in fn is its error.
func (s *pgStore) batch(fn func(kvTx) error) error { return s.update(safely(fn)) }

// batchIn is batch, each attempt run after the writes of the same lane
// this process started before it: they would read and write the same
// rows, and under SERIALIZABLE each would abort the others and run again. Lanes share a
// mutex when their names hash alike, which only queues more than needed.
func (s *pgStore) batchIn(lane string, fn func(kvTx) error) error {
	if lane == "" {
		return s.batch(fn)
	}
	h := fnv.New32a()
	h.Write([]byte(lane))
	return s.updateIn(&s.lanes[h.Sum32()%uint32(len(s.lanes))], serializable, safely(fn))
}

// safely turns a panic in fn into its error: an enqueued fn runs on a
// goroutine of its own, where a panic would end the process.
func safely(fn func(kvTx) error) func(kvTx) error {
	return func(t kvTx) (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("store: panic in a write function: %v", r)
			}
		}()
		return fn(t)
	}
}

func (s *pgStore) enqueue(fn func(kvTx) error) <-chan error { return s.queue(s.batch, fn) }

func (s *pgStore) batchRows(fn func(kvTx) error) error { return s.updateRows(safely(fn)) }

func (s *pgStore) enqueueRows(fn func(kvTx) error) <-chan error { return s.queue(s.batchRows, fn) }

// queue runs fn by run on a goroutine of its own, which flush waits for.
func (s *pgStore) queue(run func(func(kvTx) error) error, fn func(kvTx) error) <-chan error {
	out := make(chan error, 1)
	done := make(chan struct{})
	s.mu.Lock()
	s.pending[done] = true
	s.mu.Unlock()
	go func() {
		out <- run(fn)
		s.mu.Lock()
		delete(s.pending, done)
		s.mu.Unlock()
		close(done)
	}()
	return out
}

func (s *pgStore) flush() {
	s.mu.Lock()
	waits := slices.Collect(maps.Keys(s.pending))
	s.mu.Unlock()
	for _, done := range waits {
		<-done
	}
}

func (s *pgStore) commits() (uint64, error) { return s.committed.Load(), nil }

func (s *pgStore) close() error {
	s.flush()
	s.mu.Lock()
	closed := s.closed
	s.closed = true
	s.mu.Unlock()
	if !closed {
		s.pool.Close()
	}
	return nil
}
