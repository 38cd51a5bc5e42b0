package engine

import "sync"

// workflowLocks serializes the steps of one workflow in this process and
// nothing else: two workflows never wait for each other (a fixed set of
// striped mutexes had workflows that hashed alike wait through each
// other's dispatch). An entry lives only while someone holds or awaits
// it, so the map holds at most the workflows in flight.
//
// A holder may leave a write behind that is queued but not yet durable
// (holdUntil): the lock then passes to the next holder only once that
// write is durable, and readers of the workflow wait for it (settle), so
// no one sees the workflow from before a write whose answer has gone out.
type workflowLocks struct {
	mu      sync.Mutex
	entries map[string]*workflowLock
}

type workflowLock struct {
	sync.Mutex
	refs    int           // holders, waiters and a pending write; guarded by workflowLocks.mu
	pending chan struct{} // closed when the write left by the holder is durable; guarded by workflowLocks.mu
}

// lock takes wf's lock and returns its release.
func (l *workflowLocks) lock(wf string) func() {
	e := l.ref(wf)
	e.Lock()
	return func() {
		l.mu.Lock()
		pending := e.pending
		l.mu.Unlock()
		if pending == nil {
			e.Unlock()
			l.unref(wf, e)
			return
		}
		go func() {
			<-pending
			// Drop the reference before unlocking, so that whoever takes
			// the lock next finds this holder gone from the count.
			l.mu.Lock()
			e.pending = nil
			l.dropLocked(wf, e)
			l.mu.Unlock()
			e.Unlock()
		}()
	}
}

// holdUntil keeps wf's lock, which the caller holds, from passing on
// before durable is closed.
func (l *workflowLocks) holdUntil(wf string, durable chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries[wf].pending = durable
}

// settle waits until no write left on wf is pending.
func (l *workflowLocks) settle(wf string) {
	l.mu.Lock()
	var pending chan struct{}
	if e := l.entries[wf]; e != nil {
		pending = e.pending
	}
	l.mu.Unlock()
	if pending != nil {
		<-pending
	}
}

// settleAll waits until no write left on any workflow at the moment of
// the call is pending.
func (l *workflowLocks) settleAll() {
	l.mu.Lock()
	var pending []chan struct{}
	for _, e := range l.entries {
		if e.pending != nil {
			pending = append(pending, e.pending)
		}
	}
	l.mu.Unlock()
	for _, p := range pending {
		<-p
	}
}

func (l *workflowLocks) ref(wf string) *workflowLock {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.entries == nil {
		l.entries = map[string]*workflowLock{}
	}
	e := l.entries[wf]
	if e == nil {
		e = &workflowLock{}
		l.entries[wf] = e
	}
	e.refs++
	return e
}

func (l *workflowLocks) unref(wf string, e *workflowLock) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dropLocked(wf, e)
}

// dropLocked drops one reference to e; l.mu is held. An entry no one
// references leaves the map even while its mutex is still locked: no one
// else can reach it, and the next locker of wf makes a fresh one.
func (l *workflowLocks) dropLocked(wf string, e *workflowLock) {
	if e.refs--; e.refs == 0 {
		delete(l.entries, wf)
	}
}

// held is how many workflows have an entry: those locked or awaited.
func (l *workflowLocks) held() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.entries)
}
