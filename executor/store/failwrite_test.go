package store_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/countersign/countersign/executor/store"
)

// TestFailWriteFailsEveryKindOfWrite: with Options.FailWrite failing, an
// Update, a Batch, a BatchIn and an Enqueue each return its error and
// keep nothing they wrote; once it stops failing, writes commit again.
func TestFailWriteFailsEveryKindOfWrite(t *testing.T) {
	down := errors.New("disk full")
	var failing bool
	db, err := store.Open(filepath.Join(t.TempDir(), "state.db"), store.Options{NoSync: true,
		FailWrite: func() error {
			if failing {
				return down
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	off := func(tool string) func(*store.Tx) error {
		return func(tx *store.Tx) error { return tx.SetSwitch(tool, false) }
	}
	writes := map[string]func(fn func(*store.Tx) error) error{
		"update":   db.Update,
		"batch":    db.Batch,
		"batch in": func(fn func(*store.Tx) error) error { return db.BatchIn("lane", fn) },
		"enqueue":  func(fn func(*store.Tx) error) error { return <-db.Enqueue(fn) },
	}
	for name, write := range writes {
		t.Run(name, func(t *testing.T) {
			failing = true
			if err := write(off(name)); !errors.Is(err, down) {
				t.Fatalf("%s while the store fails writes: %v, want %v", name, err, down)
			}
			if on := switchOn(t, db, name); !on {
				t.Fatalf("%s failed, yet the switch it wrote is off", name)
			}
			failing = false
			if err := write(off(name)); err != nil {
				t.Fatal(err)
			}
			if on := switchOn(t, db, name); on {
				t.Fatalf("%s succeeded, yet the switch it wrote is on", name)
			}
		})
	}
}

func switchOn(t *testing.T, db *store.DB, tool string) bool {
	t.Helper()
	var on bool
	if err := db.View(func(tx *store.Tx) error { on = tx.Switch(tool); return nil }); err != nil {
		t.Fatal(err)
	}
	return on
}
