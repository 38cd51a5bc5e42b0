package groupcommit_test

import (
	"errors"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/countersign/countersign/executor/groupcommit"
)

var bucketTest = []byte("test")

type fixture struct {
	*groupcommit.Group
	db *bolt.DB
}

func openGroup(t *testing.T) fixture {
	t.Helper()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "g.db"), 0o600, &bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket(bucketTest); return err }); err != nil {
		t.Fatal(err)
	}
	return fixture{groupcommit.New(db, 0), db}
}

func txID(t *testing.T, db *bolt.DB) int {
	t.Helper()
	var id int
	if err := db.View(func(tx *bolt.Tx) error { id = tx.ID(); return nil }); err != nil {
		t.Fatal(err)
	}
	return id
}

func put(k string) func(*bolt.Tx) error {
	return func(tx *bolt.Tx) error { return tx.Bucket(bucketTest).Put([]byte(k), []byte("v")) }
}

// queued waits until n calls wait behind the commit in progress.
func (g fixture) queued(n int) {
	for g.Queued() < n {
		runtime.Gosched()
	}
}

// TestGroupSharesCommits: a lone call commits at once; calls that arrive
// while a commit is in progress are committed together in the next one.
func TestGroupSharesCommits(t *testing.T) {
	g := openGroup(t)
	before := txID(t, g.db)
	if err := g.Update(put("alone")); err != nil {
		t.Fatal(err)
	}
	if n := txID(t, g.db) - before; n != 1 {
		t.Fatalf("a lone call took %d commits, want 1", n)
	}

	before = txID(t, g.db)
	entered, release := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		err := g.Update(func(tx *bolt.Tx) error {
			close(entered)
			<-release
			return put("first")(tx)
		})
		if err != nil {
			t.Error(err)
		}
	})
	<-entered
	const n = 10
	for i := range n {
		wg.Go(func() {
			if err := g.Update(put(string(rune('a' + i)))); err != nil {
				t.Error(err)
			}
		})
	}
	g.queued(n)
	close(release)
	wg.Wait()
	if c := txID(t, g.db) - before; c != 2 {
		t.Fatalf("1 call then %d queued behind it took %d commits, want 2", n, c)
	}
	if err := g.db.View(func(tx *bolt.Tx) error {
		if k := tx.Bucket(bucketTest).Stats().KeyN; k != n+2 {
			t.Errorf("%d keys, want %d", k, n+2)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestGroupIsolatesFailures: when one call of a shared commit fails (or
// panics), the others are committed all the same, each caller gets its
// own outcome, and nothing of the failed calls is kept.
func TestGroupIsolatesFailures(t *testing.T) {
	g := openGroup(t)
	entered, release := make(chan struct{}), make(chan struct{})
	boom := errors.New("boom")
	calls := map[string]func(*bolt.Tx) error{
		"good-1": put("good-1"),
		"fails": func(tx *bolt.Tx) error {
			_ = put("fails")(tx)
			return boom
		},
		"panics": func(tx *bolt.Tx) error {
			_ = put("panics")(tx)
			panic("oops")
		},
		"good-2": put("good-2"),
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs = map[string]error{}
	)
	wg.Go(func() {
		_ = g.Update(func(*bolt.Tx) error { close(entered); <-release; return nil })
	})
	<-entered
	for name, fn := range calls {
		wg.Go(func() {
			err := g.Update(fn)
			mu.Lock()
			errs[name] = err
			mu.Unlock()
		})
	}
	g.queued(len(calls))
	close(release)
	wg.Wait()
	if errs["good-1"] != nil || errs["good-2"] != nil || !errors.Is(errs["fails"], boom) || errs["panics"] == nil {
		t.Fatalf("outcomes %v, want the good ones nil, fails boom, panics an error", errs)
	}
	if err := g.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketTest)
		for k, want := range map[string]bool{"good-1": true, "good-2": true, "fails": false, "panics": false} {
			if got := b.Get([]byte(k)) != nil; got != want {
				t.Errorf("%s kept: %v, want %v", k, got, want)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
