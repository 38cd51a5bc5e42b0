package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/pgtest"
	"github.com/countersign/countersign/executor/store"
)

func openPostgres(t testing.TB, url string) *store.DB {
	t.Helper()
	db, err := store.OpenPostgres(context.Background(), url, store.PostgresOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// Two handles on one database, as two sidecars hold it, each with its own
// pool: writers on both read the order's total, and spend only while it
// stays under a cap. SERIALIZABLE with retry must give exactly the cap,
// no refund more (two writers spending the same headroom) and no update
// lost (a total short of its steps).
func TestPostgresTwoHandlesNeverSpendTheSameHeadroom(t *testing.T) {
	url := pgtest.URL(t)
	handles := []*store.DB{openPostgres(t, url), openPostgres(t, url)}
	const (
		writers  = 16
		attempts = 10
		amount   = money.Cents(100)
		limit    = 50 * amount // fewer than writers*attempts refunds fit
	)
	mustUpdate(t, handles[0], func(tx *store.Tx) error {
		for w := range writers {
			if err := tx.CreateWorkflow(store.Workflow{ID: fmt.Sprintf("W%d", w), User: "rep-ana"}); err != nil {
				return err
			}
		}
		return nil
	})
	var wg sync.WaitGroup
	errs := make(chan error, writers*attempts)
	for w := range writers {
		db := handles[w%2]
		wg.Go(func() {
			for n := 1; n <= attempts; n++ {
				errs <- db.Batch(func(tx *store.Tx) error {
					if tx.OrderSpent("O-1")+amount > limit {
						return nil
					}
					return tx.PutStep(refund(fmt.Sprintf("W%d", w), n, "O-1", amount, store.StepStarted, t0))
				})
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	// Read through the other handle than the one that created the workflows.
	handles[1].View(func(tx *store.Tx) error {
		var spent money.Cents
		err := tx.AllSteps(func(s store.Step) error {
			if s.Status.Spent() {
				spent += s.Args.Amount
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if spent != limit || tx.OrderSpent("O-1") != limit || tx.RepSpentSince("rep-ana", t0) != limit || tx.AgentSpentSince(t0) != limit {
			t.Errorf("steps spent %v, order total %v, rep %v, agent %v; want each %v",
				spent, tx.OrderSpent("O-1"), tx.RepSpentSince("rep-ana", t0), tx.AgentSpentSince(t0), limit)
		}
		return nil
	})
	t.Logf("%d writes, %d + %d attempts run again after a conflict", writers*attempts, store.Retries(handles[0]), store.Retries(handles[1]))
}

// Sidecars started together each migrate the same new database: one
// applies the migrations, the others wait on its lock and find them
// applied; every open succeeds and each version is recorded once.
func TestPostgresMigrationsRaceOnce(t *testing.T) {
	url := pgtest.URL(t)
	const opens = 6
	dbs := make([]*store.DB, opens)
	errs := make([]error, opens)
	var wg sync.WaitGroup
	for i := range opens {
		wg.Go(func() { dbs[i], errs[i] = store.OpenPostgres(context.Background(), url, store.PostgresOptions{}) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		t.Cleanup(func() { dbs[i].Close() })
	}
	for i, db := range dbs {
		mustUpdate(t, db, func(tx *store.Tx) error { return tx.SetSwitch(fmt.Sprint("tool-", i), false) })
	}
	dbs[0].View(func(tx *store.Tx) error {
		for i := range opens {
			if tx.Switch(fmt.Sprint("tool-", i)) {
				t.Errorf("the write through open %d is not seen through open 0", i)
			}
		}
		return nil
	})
	conn := connect(t, url)
	var rows, top int
	if err := conn.QueryRow(context.Background(), `SELECT count(*), max(version) FROM schema_migrations`).Scan(&rows, &top); err != nil {
		t.Fatal(err)
	}
	if rows != store.SchemaVersion || top != store.SchemaVersion {
		t.Errorf("schema_migrations has %d rows up to version %d, want %d once each", rows, top, store.SchemaVersion)
	}
}

// A database a newer countersign migrated is refused, not used.
func TestPostgresRefusesANewerSchema(t *testing.T) {
	url := pgtest.URL(t)
	openPostgres(t, url).Close()
	if _, err := connect(t, url).Exec(context.Background(), `INSERT INTO schema_migrations (version) VALUES ($1)`, store.SchemaVersion+1); err != nil {
		t.Fatal(err)
	}
	_, err := store.OpenPostgres(context.Background(), url, store.PostgresOptions{})
	if !errors.Is(err, store.ErrSchemaNewer) {
		t.Fatalf("open: %v, want ErrSchemaNewer", err)
	}
}

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// A store closed and opened again holds what it held, and its sequences
// go on where they stopped.
func TestReopenKeepsDataAndSequences(t *testing.T) {
	eachPlace(t, func(t *testing.T, open opener) {
		db := open(t)
		var first store.Decision
		var approval string
		mustUpdate(t, db, func(tx *store.Tx) (err error) {
			if err := tx.CreateWorkflow(store.Workflow{ID: "W1", User: "rep-ana"}); err != nil {
				return err
			}
			if first, err = tx.AppendDecision(store.Decision{Workflow: "W1", At: t0}); err != nil {
				return err
			}
			approval, err = tx.NewApprovalID()
			return err
		})
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		db = open(t)
		mustUpdate(t, db, func(tx *store.Tx) error {
			if _, err := tx.Workflow("W1"); err != nil {
				t.Errorf("workflow after reopen: %v", err)
			}
			d, err := tx.AppendDecision(store.Decision{Workflow: "W1", At: t0})
			if err != nil {
				return err
			}
			id, err := tx.NewApprovalID()
			if err != nil {
				return err
			}
			if first.Seq != 1 || d.Seq != 2 || approval != "AP-1" || id != "AP-2" {
				t.Errorf("decisions %d then %d, approvals %s then %s; want 1, 2, AP-1, AP-2", first.Seq, d.Seq, approval, id)
			}
			return nil
		})
	})
}
