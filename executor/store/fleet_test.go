package store_test

import (
	"context"
	"encoding/binary"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/pgtest"
	"github.com/countersign/countersign/executor/store"
)

// No lock is shared by the fleet: while one sidecar's transaction that
// spends for rep A stands open, its rows read and written, another
// sidecar's spend for rep B commits; the first then commits too (after
// running again: both read and wrote the agent's hour), and neither
// total loses the other.
func TestPostgresNoFleetWideLock(t *testing.T) {
	url := pgtest.URL(t)
	a, b := openPostgres(t, url), openPostgres(t, url)
	mustUpdate(t, a, func(tx *store.Tx) error {
		if err := tx.CreateWorkflow(store.Workflow{ID: "WA", User: "rep-ana"}); err != nil {
			return err
		}
		return tx.CreateWorkflow(store.Workflow{ID: "WB", User: "rep-ben"})
	})
	inside, release := make(chan struct{}), make(chan struct{})
	var stall sync.Once
	held := make(chan error, 1)
	go func() {
		held <- a.Update(func(tx *store.Tx) error {
			if err := tx.PutStep(refund("WA", 1, "O-1", 700, store.StepStarted, t0)); err != nil {
				return err
			}
			tx.RepSpentSince("rep-ana", t0.Add(-time.Hour)) // sends the writes: their rows are locked now
			stall.Do(func() { close(inside); <-release })
			return nil
		})
	}()
	<-inside
	other := make(chan error, 1)
	go func() {
		other <- b.Batch(func(tx *store.Tx) error {
			return tx.PutStep(refund("WB", 1, "O-2", 300, store.StepStarted, t0))
		})
	}()
	select {
	case err := <-other:
		if err != nil {
			t.Fatalf("rep B's spend through the other sidecar: %v", err)
		}
	case <-time.After(30 * time.Second):
		close(release)
		t.Fatal("rep B's spend waited 30 s for rep A's open transaction: a lock the whole fleet shares")
	}
	close(release)
	if err := <-held; err != nil {
		t.Fatalf("rep A's spend after rep B's committed: %v", err)
	}
	b.View(func(tx *store.Tx) error {
		since := t0.Add(-time.Hour)
		if got := tx.AgentSpentSince(since); got != 1000 {
			t.Errorf("agent's hour %d, want 1000", got)
		}
		if ana, ben := tx.RepSpentSince("rep-ana", since), tx.RepSpentSince("rep-ben", since); ana != 700 || ben != 300 {
			t.Errorf("rep-ana %d, rep-ben %d; want 700, 300", ana, ben)
		}
		return nil
	})
}

// A database that schema version 1 holds, with data in it, is migrated
// in place at open: what it held stays, and every number (decisions,
// workflows, approvals, lease fences) goes on after the last one the
// version-1 counters handed out, never repeating one.
func TestPostgresUpgradesAVersion1Database(t *testing.T) {
	url := pgtest.URL(t)
	ctx := context.Background()
	db := openPostgres(t, url)
	mustUpdate(t, db, func(tx *store.Tx) error {
		if err := tx.CreateWorkflow(store.Workflow{ID: "W1", User: "rep-ana"}); err != nil {
			return err
		}
		if _, err := tx.AppendDecision(store.Decision{Workflow: "W1", At: t0}); err != nil {
			return err
		}
		return tx.PutStep(refund("W1", 1, "O-1", 1234, store.StepDone, t0))
	})
	db.Close()
	// Back to version 1 as it left the database: every record in the one
	// table kv, counters in kv_sequences
	// (decisions 41, the workflow index 7, lease fences 9) and the
	// approvals' in the meta bucket (12), no sequences.
	conn := connect(t, url)
	approvals := binary.BigEndian.AppendUint64(nil, 12)
	for _, q := range []string{
		`DROP VIEW kv`,
		`DROP FUNCTION countersign_expect`,
		`CREATE TABLE kv (bucket text NOT NULL, key bytea NOT NULL, value bytea NOT NULL, PRIMARY KEY (bucket, key))`,
		`DO $$ DECLARE t text; BEGIN
			FOR t IN SELECT tablename FROM pg_tables WHERE schemaname = current_schema() AND tablename LIKE 'kv\_%' LOOP
				EXECUTE format('INSERT INTO kv SELECT %L, key, value FROM %I', substr(t, 4), t);
				EXECUTE format('DROP TABLE %I', t);
			END LOOP;
		END $$`,
		`DROP SEQUENCE seq_decisions, seq_bundles, seq_leases, seq_rejections, seq_workflows_by_seq, seq_audit_pending, approval_seq`,
		`CREATE TABLE kv_sequences (bucket text PRIMARY KEY, value bigint NOT NULL)`,
		`INSERT INTO kv_sequences VALUES ('decisions', 41), ('workflows_by_seq', 7), ('leases', 9)`,
		`DELETE FROM schema_migrations WHERE version > 1`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if _, err := conn.Exec(ctx, `INSERT INTO kv VALUES ('meta', 'approval_seq', $1)`, approvals); err != nil {
		t.Fatal(err)
	}

	db = openPostgres(t, url)
	mustUpdate(t, db, func(tx *store.Tx) error {
		if _, err := tx.Workflow("W1"); err != nil {
			t.Errorf("workflow W1 after the upgrade: %v", err)
		}
		if got := tx.OrderSpent("O-1"); got != money.Cents(1234) {
			t.Errorf("O-1 spent %d after the upgrade, want 1234", got)
		}
		d, err := tx.AppendDecision(store.Decision{Workflow: "W1", At: t0})
		if err != nil {
			return err
		}
		ap, err := tx.NewApprovalID()
		if err != nil {
			return err
		}
		fence, err := tx.NextFence()
		if err != nil {
			return err
		}
		if d.Seq != 42 || ap != "AP-13" || fence != 10 {
			t.Errorf("after the upgrade: decision %d, approval %s, fence %d; want 42, AP-13, 10", d.Seq, ap, fence)
		}
		return tx.CreateWorkflow(store.Workflow{ID: "W2", User: "rep-ana"})
	})
	var version int
	if err := conn.QueryRow(ctx, `SELECT max(version) FROM schema_migrations`).Scan(&version); err != nil {
		t.Fatal(err)
	}
	if version != store.SchemaVersion {
		t.Errorf("schema version %d after the upgrade, want %d", version, store.SchemaVersion)
	}
}
