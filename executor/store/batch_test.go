package store_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/countersign/countersign/executor/store"
)

func openNoSync(t *testing.T) *store.DB {
	t.Helper()
	db, err := store.Open(filepath.Join(t.TempDir(), "state.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func commits(t *testing.T, db *store.DB) uint64 {
	t.Helper()
	n, err := db.Commits()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// blockFirstCommit queues a write that holds the writer until release is
// closed, so that writes queued meanwhile wait for the next commit.
func blockFirstCommit(db *store.DB) (release chan struct{}, done <-chan error) {
	started, release := make(chan struct{}), make(chan struct{})
	done = db.Enqueue(func(tx *store.Tx) error {
		close(started)
		<-release
		return tx.SetSwitch("first", false)
	})
	<-started
	return release, done
}

// TestBatchWritesQueuedDuringACommitShareTheNext: the group commit's point:
// eight writes that arrive while a commit runs cost one more commit, not
// eight.
func TestBatchWritesQueuedDuringACommitShareTheNext(t *testing.T) {
	db := openNoSync(t)
	before := commits(t, db)
	release, first := blockFirstCommit(db)
	var outs []<-chan error
	for i := range 8 {
		outs = append(outs, db.Enqueue(func(tx *store.Tx) error { return tx.SetSwitch(fmt.Sprint("tool-", i), false) }))
	}
	close(release)
	for _, out := range append(outs, first) {
		if err := <-out; err != nil {
			t.Fatal(err)
		}
	}
	if got := commits(t, db) - before; got != 2 {
		t.Errorf("1 write, then 8 queued during its commit: %d commits, want 2", got)
	}
	db.View(func(tx *store.Tx) error {
		for i := range 8 {
			if tx.Switch(fmt.Sprint("tool-", i)) {
				t.Errorf("tool-%d: the write did not commit", i)
			}
		}
		return nil
	})
}

// TestBatchAFailingWriteFailsAloneAndTheOthersCommit: one write's error
// rolls back the shared transaction; the store runs the others again, so
// only the failing caller sees an error and only its writes are lost.
func TestBatchAFailingWriteFailsAloneAndTheOthersCommit(t *testing.T) {
	db := openNoSync(t)
	release, first := blockFirstCommit(db)
	boom := errors.New("boom")
	runs := map[string]int{}
	write := func(name string, err error) <-chan error {
		return db.Enqueue(func(tx *store.Tx) error {
			runs[name]++ // only the committer's goroutine runs these
			if e := tx.SetSwitch(name, false); e != nil {
				return e
			}
			return err
		})
	}
	a, bad, b := write("a", nil), write("bad", boom), write("b", nil)
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-bad; !errors.Is(err, boom) {
		t.Errorf("the failing write got %v, want its own error", err)
	}
	for _, out := range []<-chan error{a, b} {
		if err := <-out; err != nil {
			t.Errorf("a write beside the failing one got %v, want nil", err)
		}
	}
	db.View(func(tx *store.Tx) error {
		if !tx.Switch("bad") {
			t.Error("the failing write's change committed")
		}
		if tx.Switch("a") || tx.Switch("b") {
			t.Error("a write beside the failing one was lost")
		}
		return nil
	})
	if runs["a"] != 2 || runs["b"] != 1 {
		t.Errorf("runs %v: want a run again after the failure, b once (it came after)", runs)
	}
}

// TestBatchAloneCommitsAtOnce: one writer with nobody else waits for no
// timer and pays exactly one commit per write.
func TestBatchAloneCommitsAtOnce(t *testing.T) {
	eachBackend(t, func(t *testing.T, open opener) {
		db := open(t)
		before := commits(t, db)
		for i := range 5 {
			if err := db.Batch(func(tx *store.Tx) error { return tx.SetSwitch(fmt.Sprint("t", i), false) }); err != nil {
				t.Fatal(err)
			}
		}
		if got := commits(t, db) - before; got != 5 {
			t.Errorf("5 writes one after another: %d commits, want 5", got)
		}
	})
}

// Flush returns once every write enqueued before it has committed: all
// of them are then visible, and each caller has its outcome.
func TestFlushWaitsForEveryEnqueuedWrite(t *testing.T) {
	eachBackend(t, func(t *testing.T, open opener) {
		db := open(t)
		var outs []<-chan error
		for i := range 20 {
			outs = append(outs, db.Enqueue(func(tx *store.Tx) error { return tx.SetSwitch(fmt.Sprint("tool-", i), false) }))
		}
		db.Flush()
		db.View(func(tx *store.Tx) error {
			for i := range 20 {
				if tx.Switch(fmt.Sprint("tool-", i)) {
					t.Errorf("tool-%d: the write is not visible after Flush", i)
				}
			}
			return nil
		})
		for i, out := range outs {
			select {
			case err := <-out:
				if err != nil {
					t.Errorf("write %d: %v", i, err)
				}
			default:
				t.Errorf("write %d has no outcome after Flush", i)
			}
		}
	})
}

// A panic in a batched write is that write's error, whichever goroutine
// ran it; nothing of it commits and the store goes on.
func TestBatchAPanicIsTheWritesError(t *testing.T) {
	eachBackend(t, func(t *testing.T, open opener) {
		db := open(t)
		err := <-db.Enqueue(func(tx *store.Tx) error {
			if err := tx.SetSwitch("half", false); err != nil {
				return err
			}
			panic("boom")
		})
		if err == nil || !strings.Contains(err.Error(), "boom") {
			t.Fatalf("a panicking write returned %v, want its panic as an error", err)
		}
		mustUpdate(t, db, func(tx *store.Tx) error { return tx.SetSwitch("after", false) })
		db.View(func(tx *store.Tx) error {
			if !tx.Switch("half") || tx.Switch("after") {
				t.Errorf("half off %v (want on: it rolled back), after off %v (want off)", !tx.Switch("half"), !tx.Switch("after"))
			}
			return nil
		})
	})
}
