package store_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/countersign/countersign/executor/store"
)

// createWorkflows creates the workflows in the order given.
func createWorkflows(t *testing.T, db *store.DB, ws ...store.Workflow) {
	t.Helper()
	mustUpdate(t, db, func(tx *store.Tx) error {
		for _, w := range ws {
			if err := tx.CreateWorkflow(w); err != nil {
				return err
			}
		}
		return nil
	})
}

// pages reads every page of f, limit at a time, and returns the ids in
// the order the pages gave them.
func pages(t *testing.T, db *store.DB, f store.WorkflowFilter, limit int) []string {
	t.Helper()
	var ids []string
	for range 100 {
		var p store.WorkflowPage
		if err := db.View(func(tx *store.Tx) (err error) { p, err = tx.WorkflowPage(f, limit); return err }); err != nil {
			t.Fatalf("page after %d: %v", f.After, err)
		}
		if len(p.Workflows) > limit {
			t.Fatalf("a page of %d, over the limit %d", len(p.Workflows), limit)
		}
		for _, w := range p.Workflows {
			ids = append(ids, w.ID)
		}
		if p.Next == 0 {
			return ids
		}
		if len(p.Workflows) != limit {
			t.Fatalf("a page of %d with more to follow; a page is full unless it is the last", len(p.Workflows))
		}
		f.After = p.Next
	}
	t.Fatal("more than 100 pages")
	return nil
}

// Every page size, with and without a user and a status, lists each
// selected workflow once, in the order they were created (not id order).
func TestWorkflowPagesCoverEachWorkflowOnce(t *testing.T) {
	eachBackend(t, func(t *testing.T, open opener) {
		db := open(t)
		var ws []store.Workflow
		for i := range 9 {
			w := store.Workflow{ID: fmt.Sprintf("W-%d", 9-i), User: []string{"rep-ana", "rep-ben", "rep-cy"}[i%3],
				Status: store.WorkflowRunning, Created: t0.Add(time.Duration(i) * time.Minute)}
			if i%2 == 0 {
				w.Status = store.WorkflowDone
			}
			ws = append(ws, w)
		}
		createWorkflows(t, db, ws...)
		for _, tc := range []struct {
			name string
			f    store.WorkflowFilter
			want []string
		}{
			{"all of them", store.WorkflowFilter{}, []string{"W-9", "W-8", "W-7", "W-6", "W-5", "W-4", "W-3", "W-2", "W-1"}},
			{"one user's", store.WorkflowFilter{User: "rep-ana"}, []string{"W-9", "W-6", "W-3"}},
			{"done ones", store.WorkflowFilter{Status: store.WorkflowDone}, []string{"W-9", "W-7", "W-5", "W-3", "W-1"}},
			{"one user's running ones", store.WorkflowFilter{User: "rep-ben", Status: store.WorkflowRunning}, []string{"W-8", "W-2"}},
			{"a user with none", store.WorkflowFilter{User: "rep-dan"}, nil},
			{"a status none is in", store.WorkflowFilter{Status: store.WorkflowPaused}, nil},
		} {
			for limit := 1; limit <= 10; limit++ {
				t.Run(fmt.Sprintf("%s, %d a page", tc.name, limit), func(t *testing.T) {
					if got := pages(t, db, tc.f, limit); !slices.Equal(got, tc.want) {
						t.Errorf("listed %v, want %v", got, tc.want)
					}
				})
			}
		}
	})
}

// Listing one user's workflows reads theirs and no one else's: the others
// are made unreadable, and the listing still succeeds. A user whose id
// begins with another's and a NUL is another user.
func TestWorkflowPageOfAUserReadsOnlyTheirs(t *testing.T) {
	eachBackend(t, func(t *testing.T, open opener) {
		db := open(t)
		var ws []store.Workflow
		for i := range 30 {
			user := []string{"rep-ana", "rep-ben", "rep-ana\x00x"}[i%3]
			ws = append(ws, store.Workflow{ID: fmt.Sprintf("W-%02d", i), User: user, Status: store.WorkflowRunning, Created: t0})
		}
		createWorkflows(t, db, ws...)
		mustUpdate(t, db, func(tx *store.Tx) error {
			for _, w := range ws {
				if w.User != "rep-ana" {
					if err := tx.OverwriteWorkflow(w.ID, []byte("unreadable")); err != nil {
						return err
					}
				}
			}
			return nil
		})
		got := pages(t, db, store.WorkflowFilter{User: "rep-ana"}, 4)
		want := []string{"W-00", "W-03", "W-06", "W-09", "W-12", "W-15", "W-18", "W-21", "W-24", "W-27"}
		if !slices.Equal(got, want) {
			t.Errorf("rep-ana's workflows %v, want %v", got, want)
		}
		err := db.View(func(tx *store.Tx) error { _, err := tx.WorkflowPage(store.WorkflowFilter{}, 100); return err })
		if err == nil {
			t.Error("listing everyone's workflows read past the unreadable ones: the test shows nothing")
		}
	})
}

func TestWorkflowPageRefusesAnEmptyPage(t *testing.T) {
	eachBackend(t, func(t *testing.T, open opener) {
		db := open(t)
		err := db.View(func(tx *store.Tx) error { _, err := tx.WorkflowPage(store.WorkflowFilter{}, 0); return err })
		if err == nil {
			t.Error("a page of 0 workflows was answered")
		}
	})
}

// A store written before the workflow indexes existed gets them at Open,
// numbered in the order the workflows were created; a workflow created
// afterwards comes after them.
func TestWorkflowIndexBuiltForAnOlderStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := store.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	createWorkflows(t, db,
		store.Workflow{ID: "W-a", User: "rep-ana", Created: t0.Add(2 * time.Minute)},
		store.Workflow{ID: "W-b", User: "rep-ben", Created: t0},
		store.Workflow{ID: "W-d", User: "rep-ana", Created: t0.Add(time.Minute)},
		store.Workflow{ID: "W-c", User: "rep-ana", Created: t0.Add(time.Minute)},
	)
	db.Close()
	raw, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.Update(func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket([]byte("workflows_by_seq")); err != nil {
			return err
		}
		return tx.DeleteBucket([]byte("workflows_by_user"))
	}); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	db, err = store.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	createWorkflows(t, db, store.Workflow{ID: "W-0", User: "rep-ana", Created: t0.Add(-time.Hour)})
	if got, want := pages(t, db, store.WorkflowFilter{}, 2), []string{"W-b", "W-c", "W-d", "W-a", "W-0"}; !slices.Equal(got, want) {
		t.Errorf("all workflows %v, want %v", got, want)
	}
	if got, want := pages(t, db, store.WorkflowFilter{User: "rep-ana"}, 2), []string{"W-c", "W-d", "W-a", "W-0"}; !slices.Equal(got, want) {
		t.Errorf("rep-ana's workflows %v, want %v", got, want)
	}
}

// A page of one rep's workflows costs the same whatever the number of
// other reps' workflows in the store.
func BenchmarkWorkflowPage(b *testing.B) {
	for _, size := range []int{1000, 100000} {
		db, err := store.Open(filepath.Join(b.TempDir(), "s.db"), store.Options{NoSync: true})
		if err != nil {
			b.Fatal(err)
		}
		for start := 0; start < size; start += 1000 {
			if err := db.Update(func(tx *store.Tx) error {
				for i := start; i < start+1000; i++ {
					w := store.Workflow{ID: fmt.Sprintf("W%d", i), User: fmt.Sprintf("rep-%d", i%100), Status: store.WorkflowDone, Created: t0}
					if err := tx.CreateWorkflow(w); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				b.Fatal(err)
			}
		}
		for _, f := range []struct {
			name string
			f    store.WorkflowFilter
		}{
			{"one rep's first page", store.WorkflowFilter{User: "rep-7"}},
			{"everyone's first page", store.WorkflowFilter{}},
		} {
			b.Run(fmt.Sprintf("workflows=%d/%s", size, f.name), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if err := db.View(func(tx *store.Tx) error { _, err := tx.WorkflowPage(f.f, 50); return err }); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		db.Close()
	}
}
