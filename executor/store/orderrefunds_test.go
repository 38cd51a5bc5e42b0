package store_test

import (
	"context"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	bolt "go.etcd.io/bbolt"

	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/pgtest"
	"github.com/countersign/countersign/executor/store"
)

// listed is an order's refunds as "workflow/n amount", oldest first.
func listed(t *testing.T, db *store.DB, order string) []string {
	t.Helper()
	var out []string
	err := db.View(func(tx *store.Tx) error {
		rs, err := tx.OrderRefunds(order)
		for _, r := range rs {
			out = append(out, r.Workflow+"/"+strconv.Itoa(r.N)+" "+r.Amount.String()+" "+r.User)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func wantListed(t *testing.T, db *store.DB, order string, want ...string) {
	t.Helper()
	if got := listed(t, db, order); !slices.Equal(got, want) {
		t.Errorf("OrderRefunds(%s) = %q, want %q", order, got, want)
	}
}

// An order's refunds are listed while they count as spent, in any
// workflow, oldest reservation first, and only that order's.
func TestOrderRefundsFollowTheSpentStatuses(t *testing.T) {
	eachBackend(t, func(t *testing.T, open opener) {
		db := open(t)
		mustUpdate(t, db, func(tx *store.Tx) error {
			for _, w := range []store.Workflow{{ID: "W1", User: "rep-ben"}, {ID: "W2", User: "Rep-Ana"}, {ID: "W10", User: "rep-ben"}} {
				if err := tx.CreateWorkflow(w); err != nil {
					return err
				}
			}
			return nil
		})
		put := func(s store.Step) {
			t.Helper()
			mustUpdate(t, db, func(tx *store.Tx) error { return tx.PutStep(s) })
		}
		put(refund("W2", 1, "O-1004", 3000, store.StepDone, t0.Add(time.Minute)))
		put(refund("W1", 1, "O-1004", 2000, store.StepStarted, t0))
		put(refund("W1", 2, "O-1004", 9000, store.StepWaitingApproval, t0))
		put(refund("W10", 1, "O-10041", 100, store.StepDone, t0)) // another order, sharing a prefix
		wantListed(t, db, "O-1004", "W1/1 $20.00 rep-ben", "W2/1 $30.00 rep-ana")
		wantListed(t, db, "O-10041", "W10/1 $1.00 rep-ben")

		put(refund("W1", 1, "O-1004", 2000, store.StepUnknown, t0)) // still spent
		wantListed(t, db, "O-1004", "W1/1 $20.00 rep-ben", "W2/1 $30.00 rep-ana")
		put(refund("W1", 1, "O-1004", 2000, store.StepDenied, t0)) // released
		wantListed(t, db, "O-1004", "W2/1 $30.00 rep-ana")
		if err := db.View(func(tx *store.Tx) error {
			if got := tx.OrderSpent("O-1004"); got != money.Cents(3000) {
				t.Errorf("OrderSpent = %s, want the listed $30.00", got)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	})
}

// A store written before the list existed gets it when it is opened, on
// bbolt and on PostgreSQL.
func TestOrderRefundsBuiltForAnOlderStore(t *testing.T) {
	write := func(t *testing.T, db *store.DB) {
		mustUpdate(t, db, func(tx *store.Tx) error {
			if err := tx.CreateWorkflow(store.Workflow{ID: "W1", User: "rep-ben"}); err != nil {
				return err
			}
			for i, status := range []store.StepStatus{store.StepDone, store.StepUnknown, store.StepDenied} {
				if err := tx.PutStep(refund("W1", i+1, "O-1003", 1000, status, t0)); err != nil {
					return err
				}
			}
			return nil
		})
	}
	want := []string{"W1/1 $10.00 rep-ben", "W1/2 $10.00 rep-ben"}

	t.Run("bbolt", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "state.db")
		db, err := store.Open(path, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		write(t, db)
		db.Close()
		raw, err := bolt.Open(path, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = raw.Update(func(tx *bolt.Tx) error {
			if err := tx.Bucket([]byte("meta")).Delete([]byte("refunds_by_order_built")); err != nil {
				return err
			}
			return tx.DeleteBucket([]byte("refunds_by_order"))
		})
		raw.Close()
		if err != nil {
			t.Fatal(err)
		}
		db, err = store.Open(path, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		wantListed(t, db, "O-1003", want...)
	})
	t.Run("postgres", func(t *testing.T) {
		url := pgtest.URL(t)
		ctx := context.Background()
		db, err := store.OpenPostgres(ctx, url, store.PostgresOptions{})
		if err != nil {
			t.Fatal(err)
		}
		write(t, db)
		db.Close()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		_, err = conn.Exec(ctx, `DELETE FROM kv_refunds_by_order; DELETE FROM kv_meta WHERE key = 'refunds_by_order_built'::bytea`)
		conn.Close(ctx)
		if err != nil {
			t.Fatal(err)
		}
		db, err = store.OpenPostgres(ctx, url, store.PostgresOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		wantListed(t, db, "O-1003", want...)
	})
}
