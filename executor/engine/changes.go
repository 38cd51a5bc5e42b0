package engine

import (
	"context"
	"sync"
	"time"
)

// changes wakes the readers waiting for a workflow to change (Await). A
// workflow has an entry only while someone waits on it, and the entry is
// one channel that every waiting reader of the workflow selects on: the
// next change closes it and puts a fresh one in its place. A waiting reader
// therefore costs its own request's goroutine and nothing more, however
// long it waits, and a change nobody waits for costs a map lookup.
//
// Every commit that changes a step (a new one included) or an approval
// calls changed with the workflow after the commit returns; a commit that
// changes nothing a reader compares only wakes readers who then wait on.
type changes struct {
	mu      sync.Mutex
	entries map[string]*change
}

// change is one workflow's waiting readers.
type change struct {
	next    chan struct{} // closed at the workflow's next change; guarded by changes.mu
	readers int           // guarded by changes.mu
}

// watch registers a reader of wf until unwatch.
func (c *changes) watch(wf string) *change {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[string]*change{}
	}
	ch := c.entries[wf]
	if ch == nil {
		ch = &change{next: make(chan struct{})}
		c.entries[wf] = ch
	}
	ch.readers++
	return ch
}

// next is the channel closed at the first change of ch's workflow
// committed after next returns.
func (c *changes) next(ch *change) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return ch.next
}

// unwatch ends a reader's watch; the last one out removes the entry.
func (c *changes) unwatch(wf string, ch *change) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ch.readers--; ch.readers == 0 {
		delete(c.entries, wf)
	}
}

// changed wakes every reader waiting on wf.
func (c *changes) changed(wf string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ch := c.entries[wf]; ch != nil {
		close(ch.next)
		ch.next = make(chan struct{})
	}
}

// readers is how many readers are waiting, on all workflows.
func (c *changes) readers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, ch := range c.entries {
		n += ch.readers
	}
	return n
}

// Await waits for workflow id to change: it returns the workflow as
// Snapshot does once a step is added to it, or one of its steps or their
// approvals changes status, after Await begins (changed true), or as the
// workflow stands when ctx ends first (changed false). The caller bounds
// the wait with ctx's deadline. A rep awaits only their own workflows, as
// Snapshot reads them.
//
// A change committed before Await begins is not one it waits for: a
// reader that knows what it last saw waits with AwaitUntil instead.
func (e *Engine) Await(ctx context.Context, p Person, id string) (snap Snapshot, changed bool, err error) {
	var base *Snapshot // the first read, which every later one is compared with
	return e.AwaitUntil(ctx, p, id, func(s Snapshot) bool {
		if base == nil {
			base = &s
			return false
		}
		return !sameStatuses(*base, s)
	})
}

// AwaitUntil reads workflow id at once and again after each change, until
// done holds for a read: it returns that read (done true), or the workflow
// as it stands when ctx ends first (done false). So a reader that passes
// what it last saw (done: "this read is not that") is answered at once
// when the workflow has moved on since, however recently, and otherwise
// at its next change. A rep awaits only their own workflows, as Snapshot
// reads them; done is called on the request's goroutine, one read at a
// time.
//
// The reader is registered before the workflow is first read, so a change
// committed between that read and the wait still wakes it. On a store
// several sidecars share (Options.PollChanges) the reader also reads the
// workflow again every period, so a change another sidecar committed is
// seen within one period.
func (e *Engine) AwaitUntil(ctx context.Context, p Person, id string, done func(Snapshot) bool) (snap Snapshot, ok bool, err error) {
	ch := e.changes.watch(id)
	defer e.changes.unwatch(id, ch)
	next := e.changes.next(ch)
	snap, err = e.Snapshot(ctx, p, id)
	if err != nil || done(snap) {
		return snap, err == nil, err
	}
	var poll <-chan time.Time // nil: never, unless the store is shared
	if e.poll > 0 {
		t := time.NewTicker(e.poll)
		defer t.Stop()
		poll = t.C
	}
	for {
		select {
		case <-ctx.Done():
			snap, err := e.Snapshot(context.WithoutCancel(ctx), p, id)
			return snap, false, err
		case <-next:
		case <-poll:
		}
		next = e.changes.next(ch)
		snap, err := e.Snapshot(ctx, p, id)
		if err != nil || done(snap) {
			return snap, err == nil, err
		}
	}
}

// Waiting is how many readers are waiting in Await, on all workflows.
func (e *Engine) Waiting() int { return e.changes.readers() }

// sameStatuses reports whether a and b, two reads of one workflow, have the
// same steps in the same statuses, waiting on or run under the same
// approvals in the same statuses.
func sameStatuses(a, b Snapshot) bool {
	if a.Workflow.Status != b.Workflow.Status || len(a.Steps) != len(b.Steps) || len(a.Approvals) != len(b.Approvals) {
		return false
	}
	for i, s := range a.Steps {
		if t := b.Steps[i]; s.N != t.N || s.Status != t.Status || s.Approval != t.Approval {
			return false
		}
	}
	for id, x := range a.Approvals {
		if y, ok := b.Approvals[id]; !ok || x.Status != y.Status {
			return false
		}
	}
	return true
}
