package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// migrations are the versions of the PostgreSQL schema, in order: version
// i+1 is migrations[i]. A version once released is never edited; a change
// is a new version appended here.
var migrations = []string{
	// 1: the buckets as rows of one ordered key-value table, and the
	// buckets' sequences (bbolt keeps one per bucket).
	`CREATE TABLE kv (
		bucket text NOT NULL,
		key bytea NOT NULL,
		value bytea NOT NULL,
		PRIMARY KEY (bucket, key)
	);
	CREATE TABLE kv_sequences (
		bucket text PRIMARY KEY,
		value bigint NOT NULL
	)`,
	// 2: numbers from sequences, which no two transactions wait for or
	// conflict on (a counter row is written by every transaction that
	// takes a number: under SERIALIZABLE, concurrent ones abort each
	// other). Each starts after the last number the counter handed out.
	`CREATE SEQUENCE seq_decisions;
	CREATE SEQUENCE seq_bundles;
	CREATE SEQUENCE seq_leases;
	CREATE SEQUENCE seq_rejections;
	CREATE SEQUENCE seq_workflows_by_seq;
	CREATE SEQUENCE seq_audit_pending;
	CREATE SEQUENCE approval_seq;
	SELECT setval(('seq_' || bucket)::regclass, value) FROM kv_sequences
		WHERE bucket IN ('decisions', 'bundles', 'leases', 'rejections', 'workflows_by_seq');
	SELECT setval('approval_seq', ('x' || encode(value, 'hex'))::bit(64)::bigint) FROM kv
		WHERE bucket = 'meta' AND key = convert_to('approval_seq', 'UTF8');
	DELETE FROM kv WHERE bucket = 'meta' AND key = convert_to('approval_seq', 'UTF8');
	DROP TABLE kv_sequences`,
}

// migrationLock is the key of the advisory lock the migrations run under.
const migrationLock = "countersign.schema_migrations"

// migrate brings the schema to the last version of migrations, in one
// transaction under a transaction-level advisory lock: sidecars starting
// together queue on the lock, and each one after the first finds the
// versions applied and applies nothing. A database whose schema is newer
// than this binary knows is refused (ErrSchemaNewer) rather than used.
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	// READ COMMITTED: each statement after the lock sees what the holder
	// before committed.
	return pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, migrationLock); err != nil {
			return fmt.Errorf("migrate: take the migration lock: %w", err)
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version integer PRIMARY KEY,
			applied_at timestamptz NOT NULL DEFAULT now()
		)`); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		var current int
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
			return fmt.Errorf("migrate: read the schema version: %w", err)
		}
		if current > len(migrations) {
			return fmt.Errorf("migrate: %w: the database is at version %d, this binary knows up to %d; run a newer countersign",
				ErrSchemaNewer, current, len(migrations))
		}
		for v := current + 1; v <= len(migrations); v++ {
			if _, err := tx.Exec(ctx, migrations[v-1]); err != nil {
				return fmt.Errorf("migrate: version %d: %w", v, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version) VALUES ($1)`, v); err != nil {
				return fmt.Errorf("migrate: record version %d: %w", v, err)
			}
		}
		return nil
	})
}
