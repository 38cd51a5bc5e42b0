package store_test

import (
	"errors"
	"testing"

	"github.com/countersign/countersign/executor/store"
)

// TestCommitsCountsCommittedWritesOnly: the bench counts fsyncs as two per
// commit from this number, so reads and rolled-back writes must not move
// it and each committed write must move it by one.
func TestCommitsCountsCommittedWritesOnly(t *testing.T) {
	eachBackend(t, func(t *testing.T, open opener) {
		db := open(t)
		steps := []struct {
			name string
			run  func() error
			adds uint64
		}{
			{"a committed write adds one", func() error { return db.Update(func(*store.Tx) error { return nil }) }, 1},
			{"a read adds none", func() error { return db.View(func(*store.Tx) error { return nil }) }, 0},
			{"a rolled-back write adds none", func() error {
				if err := db.Update(func(*store.Tx) error { return errors.New("roll back") }); err == nil {
					return errors.New("the write did not roll back")
				}
				return nil
			}, 0},
			{"two committed writes add two", func() error {
				return errors.Join(db.Update(func(*store.Tx) error { return nil }), db.Update(func(*store.Tx) error { return nil }))
			}, 2},
		}
		for _, s := range steps {
			t.Run(s.name, func(t *testing.T) {
				before, err := db.Commits()
				if err != nil {
					t.Fatal(err)
				}
				if err := s.run(); err != nil {
					t.Fatal(err)
				}
				after, err := db.Commits()
				if err != nil {
					t.Fatal(err)
				}
				if after-before != s.adds {
					t.Errorf("Commits went from %d to %d, want +%d", before, after, s.adds)
				}
			})
		}
	})
}
