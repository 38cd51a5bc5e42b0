package engine

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

func (l *workflowLocks) refs(wf string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.entries[wf]; e != nil {
		return e.refs
	}
	return 0
}

func TestWorkflowLocksSerializeOneWorkflowOnly(t *testing.T) {
	var l workflowLocks
	unlockA := l.lock("A")
	// Another workflow is never blocked by A, whatever its name hashes to.
	for _, wf := range []string{"B", "C", "W-1", "W-2"} {
		l.lock(wf)()
	}
	got := make(chan struct{})
	go func() { l.lock("A")(); close(got) }()
	select {
	case <-got:
		t.Fatal("a second lock of A was granted while A was held")
	default:
	}
	unlockA()
	<-got
	if n := l.held(); n != 0 {
		t.Fatalf("%d entries left after every lock was released; want 0", n)
	}
}

func TestWorkflowLocksCountUnderContention(t *testing.T) {
	var l workflowLocks
	var wg sync.WaitGroup
	var counts [3]int // one element per workflow: holders of different workflows touch different memory
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer l.lock([]string{"A", "B", "C"}[i%3])()
			counts[i%3]++ // the race detector sees any two holders of one workflow
		}()
	}
	wg.Wait()
	if counts[0]+counts[1]+counts[2] != 200 || l.held() != 0 {
		t.Fatalf("counts %v, %d entries left", counts, l.held())
	}
}

func TestWorkflowLockPassesOnOnlyWhenTheLeftWriteIsDurable(t *testing.T) {
	var l workflowLocks
	release := l.lock("A")
	durable := make(chan struct{})
	l.holdUntil("A", durable)
	release() // the answer goes out; the write is still queued

	next, read := make(chan struct{}), make(chan struct{})
	go func() { l.lock("A")(); close(next) }()
	go func() { l.settle("A"); close(read) }()
	l.lock("B")()         // other workflows never wait
	for l.refs("A") < 2 { // the pending write and the next holder
		runtime.Gosched()
	}
	time.Sleep(20 * time.Millisecond) // time to go wrong: both would be done by now without the hold
	select {
	case <-next:
		t.Fatal("the next holder of A got the lock before the write was durable")
	case <-read:
		t.Fatal("a reader of A went on before the write was durable")
	default:
	}
	close(durable)
	<-next
	<-read
	l.settle("A")
	if n := l.held(); n != 0 {
		t.Fatalf("%d entries left; want 0", n)
	}
}
