package store

import (
	"sync"

	bolt "go.etcd.io/bbolt"
)

// DefaultMaxBatch is how many write functions one group commit carries at
// most when Options.MaxBatch is zero.
const DefaultMaxBatch = 256

// committer is a group commit without a timer: a write that finds no
// commit in progress commits at once, alone; writes that arrive while one
// is in progress queue up and share the next commit. One writer therefore
// pays one commit and no delay (bbolt's Batch waits MaxBatchDelay even when
// alone), and many writers share each fsync.
type committer struct {
	db  *bolt.DB
	max int

	mu      sync.Mutex
	queue   []*batchCall
	running bool
	// queued numbers the calls in queue order; done is the number of the
	// last call of the last batch that finished, so every call up to it
	// has its outcome (batches are contiguous and committed in order).
	queued, done uint64
	drained      *sync.Cond
}

type batchCall struct {
	fn  func(*Tx) error
	err chan error
	seq uint64
}

func newCommitter(db *bolt.DB, max int) *committer {
	if max <= 0 {
		max = DefaultMaxBatch
	}
	c := &committer{db: db, max: max}
	c.drained = sync.NewCond(&c.mu)
	return c
}

// enqueue queues fn and returns the channel its outcome arrives on.
func (c *committer) enqueue(fn func(*Tx) error) <-chan error {
	call := &batchCall{fn: fn, err: make(chan error, 1)}
	c.mu.Lock()
	c.queued++
	call.seq = c.queued
	c.queue = append(c.queue, call)
	lead := !c.running
	c.running = true
	c.mu.Unlock()
	if lead {
		go c.lead()
	}
	return call.err
}

// lead commits the queue, a batch at a time, until it is empty.
func (c *committer) lead() {
	for {
		c.mu.Lock()
		if len(c.queue) == 0 {
			c.running = false
			c.mu.Unlock()
			return
		}
		n := min(len(c.queue), c.max)
		batch := c.queue[:n:n]
		c.queue = c.queue[n:]
		c.mu.Unlock()
		c.commit(batch)
	}
}

// commit runs batch in one write transaction. A function that fails rolls
// the whole transaction back: it is run again alone, so its caller gets its
// own error and nothing it wrote, and the others are run again together.
// That is why every function must be re-runnable: compute from the
// transaction, and touch nothing outside it before its commit is known.
func (c *committer) commit(batch []*batchCall) {
	last := batch[len(batch)-1].seq
	defer func() {
		c.mu.Lock()
		c.done = last
		c.mu.Unlock()
		c.drained.Broadcast()
	}()
	for len(batch) > 0 {
		failed := -1
		err := c.db.Update(func(btx *bolt.Tx) error {
			tx := &Tx{tx: btx}
			for i, call := range batch {
				if err := call.fn(tx); err != nil {
					failed = i
					return err
				}
			}
			return nil
		})
		if failed < 0 {
			c.finish(batch, err) // nil, or the commit itself failed: everyone's outcome
			return
		}
		lone := batch[failed]
		c.finish([]*batchCall{lone}, c.db.Update(func(btx *bolt.Tx) error { return lone.fn(&Tx{tx: btx}) }))
		batch = append(batch[:failed:failed], batch[failed+1:]...)
	}
}

func (c *committer) finish(batch []*batchCall, err error) {
	for _, call := range batch {
		call.err <- err
	}
}

// flush waits until every call queued before it has its outcome.
func (c *committer) flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	target := c.queued
	for c.done < target {
		c.drained.Wait()
	}
}

// Batch runs fn in a write transaction it may share with other Batch
// calls: one commit, one fsync pair, for all of them. It returns when the
// commit that holds fn's writes is durable, with fn's error or the
// commit's. fn may run more than once (when another function in its batch
// fails): it must compute everything from the transaction and return its
// outcome through variables it sets afresh on each run, with no effect
// outside the transaction.
func (db *DB) Batch(fn func(*Tx) error) error {
	return <-db.group.enqueue(fn)
}

// BatchAsync queues fn like Batch and returns at once; the outcome
// arrives on the channel when the commit is durable. A caller that answers
// someone before the outcome arrives must be sure the answer is true
// without this commit (it is written ahead elsewhere).
func (db *DB) BatchAsync(fn func(*Tx) error) <-chan error {
	return db.group.enqueue(fn)
}
