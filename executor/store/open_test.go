package store_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/countersign/countersign/executor/store"
)

// TestOpenUnwritableDir: a store that cannot be created is ErrUnwritable,
// with the cause kept. The tests may run as root, which ignores file modes,
// so the directory is made impossible by putting a regular file in its path.
func TestOpenUnwritableDir(t *testing.T) {
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, path string }{
		{"a directory under a regular file is unwritable", filepath.Join(file, "data", "state.db")},
		{"a regular file as the directory is unwritable", filepath.Join(file, "state.db")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := store.Open(tc.path, store.Options{})
			if !errors.Is(err, store.ErrUnwritable) || errors.Is(err, store.ErrLocked) {
				t.Fatalf("Open(%s) = %v, want ErrUnwritable", tc.path, err)
			}
			var pe *os.PathError
			if !errors.As(err, &pe) {
				t.Errorf("the cause is lost: %v", err)
			}
		})
	}
}
