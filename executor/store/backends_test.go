package store_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/countersign/countersign/executor/pgtest"
	"github.com/countersign/countersign/executor/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// opener opens a store for t, closed when t ends.
type opener func(t testing.TB) *store.DB

// A backend is where a store can live. place makes a new, empty place
// and returns an opener that opens the store there: the same store on
// every call, so that a test can close it and open it again.
type backend struct {
	name  string
	place func(t testing.TB) opener
}

var backends = []backend{
	{"bbolt", func(t testing.TB) opener {
		path := filepath.Join(t.TempDir(), "state.db")
		return func(t testing.TB) *store.DB {
			t.Helper()
			db, err := store.Open(path, store.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			return db
		}
	}},
	{"postgres", func(t testing.TB) opener {
		url := pgtest.URL(t)
		return func(t testing.TB) *store.DB {
			t.Helper()
			db, err := store.OpenPostgres(context.Background(), url, store.PostgresOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			return db
		}
	}},
}

// eachBackend runs test as a subtest on every backend, bbolt and
// PostgreSQL (which pgtest skips, naming the command that runs it, where
// PostgreSQL is not installed). Each call of open opens a new, empty store.
func eachBackend(t *testing.T, test func(t *testing.T, open opener)) {
	t.Helper()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			test(t, func(t testing.TB) *store.DB { t.Helper(); return b.place(t)(t) })
		})
	}
}

// eachPlace runs test as a subtest on every backend with an opener that
// opens one and the same store on every call.
func eachPlace(t *testing.T, test func(t *testing.T, open opener)) {
	t.Helper()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { test(t, b.place(t)) })
	}
}
