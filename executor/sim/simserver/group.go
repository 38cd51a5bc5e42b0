package simserver

import (
	"fmt"
	"sync"

	bolt "go.etcd.io/bbolt"
)

// group commits the write transactions of concurrent requests together, so
// that they share one commit and its fsyncs. A request that finds no commit
// in progress commits at once, alone: unlike bolt's Batch it never waits
// for company (Batch's timer cost a lone writer most of its throughput,
// DEPS-NOTES-2 section 3). Requests that arrive while a commit is in
// progress queue, and the next commit takes all of them; so no request
// waits for more than the commit in progress and its own.
//
// A function may run more than once (when the shared transaction fails,
// each is run again alone so that one request's error is not another's):
// it must set its results afresh on every run, and return an error only
// when nothing of the transaction may be kept. An answer such as "not
// found" is a result, not an error.
type group struct {
	db *bolt.DB

	mu      sync.Mutex
	queue   []*pending
	leading bool // a goroutine is committing, and will commit the queue after
}

type pending struct {
	fn   func(*bolt.Tx) error
	done chan error
}

// update runs fn in a write transaction shared with the requests queued
// beside it and returns once that transaction is committed (or failed).
func (g *group) update(fn func(*bolt.Tx) error) error {
	p := &pending{fn: fn, done: make(chan error, 1)}
	g.mu.Lock()
	g.queue = append(g.queue, p)
	lead := !g.leading
	g.leading = true
	g.mu.Unlock()
	if lead {
		g.lead()
	}
	return <-p.done
}

// lead commits the queue; what queued meanwhile is committed by a new
// leader, so that this request's caller is answered now.
func (g *group) lead() {
	g.mu.Lock()
	calls := g.queue
	g.queue = nil
	g.mu.Unlock()
	g.commit(calls)
	g.mu.Lock()
	more := len(g.queue) > 0
	g.leading = more
	g.mu.Unlock()
	if more {
		go g.lead()
	}
}

// commit runs calls in one transaction. If it fails, each runs again in a
// transaction of its own, so each caller gets the error of its own work.
func (g *group) commit(calls []*pending) {
	err := g.db.Update(func(tx *bolt.Tx) error {
		for _, p := range calls {
			if err := safely(p.fn, tx); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil && len(calls) > 1 {
		for _, p := range calls {
			p.done <- g.db.Update(func(tx *bolt.Tx) error { return safely(p.fn, tx) })
		}
		return
	}
	for _, p := range calls {
		p.done <- err
	}
}

// safely runs fn, turning a panic into an error: fn may run on another
// request's goroutine, where a panic would take the whole system down.
func safely(fn func(*bolt.Tx) error, tx *bolt.Tx) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic in a write transaction: %v", r)
		}
	}()
	return fn(tx)
}
