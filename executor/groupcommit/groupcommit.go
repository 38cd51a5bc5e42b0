// Package groupcommit shares bbolt commits among concurrent writers: the
// sidecar's store and the simulated systems of record both use it. It
// knows only bbolt, so the simulators may import it without importing
// anything of the sidecar or the engine.
//
// It is a group commit without a timer. A write that finds no commit in
// progress commits at once, alone; writes that arrive while one is in
// progress queue and share the next commit, up to a maximum. One writer
// therefore pays one commit and no delay (bbolt's Batch waits its
// MaxBatchDelay even when alone, which cost a lone writer most of its
// throughput), and many writers share each pair of fsyncs.
//
// A function may run more than once: when another function of its batch
// fails, the shared transaction rolls back, the failing function runs again
// alone (its caller gets its own error and keeps nothing) and the others
// run again together. So a function must compute everything from its
// transaction, set its results afresh on each run, touch nothing outside
// the transaction before its commit is known, and return an error only
// when nothing of it may be kept. A panic in a function is its error: it
// may run on another writer's goroutine.
package groupcommit

import (
	"fmt"
	"sync"

	bolt "go.etcd.io/bbolt"
)

// DefaultMax is how many functions one commit carries at most when New is
// given zero.
const DefaultMax = 256

// Group commits the write functions given to it in shared transactions. It
// is safe for concurrent use.
type Group struct {
	db  *bolt.DB
	max int

	mu      sync.Mutex
	queue   []*call
	running bool
	// queued numbers the calls in queue order; done is the number of the
	// last call of the last batch that finished, so every call up to it
	// has its outcome (batches are contiguous and committed in order).
	queued, done uint64
	drained      *sync.Cond
}

type call struct {
	fn  func(*bolt.Tx) error
	err chan error
	seq uint64
}

// New returns a group over db carrying at most max functions per commit
// (DefaultMax when max <= 0).
func New(db *bolt.DB, max int) *Group {
	if max <= 0 {
		max = DefaultMax
	}
	g := &Group{db: db, max: max}
	g.drained = sync.NewCond(&g.mu)
	return g
}

// Update runs fn in a write transaction it may share with other writers
// and returns once the commit that holds fn's writes is durable, with fn's
// error or the commit's.
func (g *Group) Update(fn func(*bolt.Tx) error) error {
	return <-g.Enqueue(fn)
}

// Enqueue queues fn like Update and returns at once; fn's outcome arrives
// on the channel when its commit is durable.
func (g *Group) Enqueue(fn func(*bolt.Tx) error) <-chan error {
	c := &call{fn: fn, err: make(chan error, 1)}
	g.mu.Lock()
	g.queued++
	c.seq = g.queued
	g.queue = append(g.queue, c)
	lead := !g.running
	g.running = true
	g.mu.Unlock()
	if lead {
		go g.lead()
	}
	return c.err
}

// Flush waits until every function queued before it has its outcome.
func (g *Group) Flush() {
	g.mu.Lock()
	defer g.mu.Unlock()
	target := g.queued
	for g.done < target {
		g.drained.Wait()
	}
}

// lead commits the queue, a batch at a time, until it is empty.
func (g *Group) lead() {
	for {
		g.mu.Lock()
		if len(g.queue) == 0 {
			g.running = false
			g.mu.Unlock()
			return
		}
		n := min(len(g.queue), g.max)
		batch := g.queue[:n:n]
		g.queue = g.queue[n:]
		g.mu.Unlock()
		g.commit(batch)
	}
}

// commit runs batch in one write transaction; a failing function is run
// again alone and the rest again together, until every call has its
// outcome.
func (g *Group) commit(batch []*call) {
	last := batch[len(batch)-1].seq
	defer func() {
		g.mu.Lock()
		g.done = last
		g.mu.Unlock()
		g.drained.Broadcast()
	}()
	for len(batch) > 0 {
		failed := -1
		err := g.db.Update(func(tx *bolt.Tx) error {
			for i, c := range batch {
				if err := safely(c.fn, tx); err != nil {
					failed = i
					return err
				}
			}
			return nil
		})
		if failed < 0 {
			finish(batch, err) // nil, or the commit itself failed: everyone's outcome
			return
		}
		lone := batch[failed]
		finish([]*call{lone}, g.db.Update(func(tx *bolt.Tx) error { return safely(lone.fn, tx) }))
		batch = append(batch[:failed:failed], batch[failed+1:]...)
	}
}

func finish(batch []*call, err error) {
	for _, c := range batch {
		c.err <- err
	}
}

// safely runs fn, turning a panic into its error.
func safely(fn func(*bolt.Tx) error, tx *bolt.Tx) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("groupcommit: panic in a write function: %v", r)
		}
	}()
	return fn(tx)
}
