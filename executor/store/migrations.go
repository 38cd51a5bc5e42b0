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
	// 3: a table per bucket, kv_<bucket> (key, value), instead of one
	// table for all. PostgreSQL's SERIALIZABLE watches what a transaction
	// read by index page, so in one table the rows of neighbouring buckets
	// share pages, and writers of unrelated records (an audit record, a
	// decision, the sequencer's lease) conflicted through them. A database
	// holding a bucket this version does not know is refused. The view kv
	// shows every record as version 1 held them, read-only.
	`DO $$ BEGIN
		IF EXISTS (SELECT 1 FROM kv WHERE bucket NOT IN ('alerts', 'approvals', 'audit', 'audit_pending', 'breakers', 'bundle_blobs', 'bundles', 'calls', 'credential_keys', 'decisions', 'decisions_by_workflow', 'lease_fences', 'leases', 'meta', 'modes', 'page_sessions', 'refunds_by_order', 'rejections', 'reships_by_order', 'spent_by_agent', 'spent_by_agent_sums', 'spent_by_order', 'spent_by_rep', 'spent_by_rep_sums', 'steps', 'switches', 'workflows', 'workflows_by_seq', 'workflows_by_user')) THEN
			RAISE EXCEPTION 'kv holds a bucket this countersign does not know: run the countersign that wrote it';
		END IF;
	END $$;
	CREATE TABLE kv_alerts (key bytea PRIMARY KEY, value bytea NOT NULL);
	INSERT INTO kv_alerts SELECT key, value FROM kv WHERE bucket = 'alerts';
	CREATE TABLE kv_approvals (key bytea PRIMARY KEY, value bytea NOT NULL);
	INSERT INTO kv_approvals SELECT key, value FROM kv WHERE bucket = 'approvals';
	CREATE TABLE kv_audit (key bytea PRIMARY KEY, value bytea NOT NULL);
	INSERT INTO kv_audit SELECT key, value FROM kv WHERE bucket = 'audit';
	CREATE TABLE kv_audit_pending (key bytea PRIMARY KEY, value bytea NOT NULL);
	INSERT INTO kv_audit_pending SELECT key, value FROM kv WHERE bucket = 'audit_pending';
	CREATE TABLE kv_breakers (key bytea PRIMARY KEY, value bytea NOT NULL);
	INSERT INTO kv_breakers SELECT key, value FROM kv WHERE bucket = 'breakers';
	CREATE TABLE kv_bundle_blobs (key bytea PRIMARY KEY, value bytea NOT NULL);
	INSERT INTO kv_bundle_blobs SELECT key, value FROM kv WHERE bucket = 'bundle_blobs';
	CREATE TABLE kv_bundles (key bytea PRIMARY KEY, value bytea NOT NULL);
	INSERT INTO kv_bundles SELECT key, value FROM kv WHERE bucket = 'bundles';
	CREATE TABLE kv_calls (key bytea PRIMARY KEY, value bytea NOT NULL);
	INSERT INTO kv_calls SELECT key, value FROM kv WHERE bucket = 'calls';
	CREATE TABLE kv_credential_keys (key bytea PRIMARY KEY, value bytea NOT NULL);
	INSERT INTO kv_credential_keys SELECT key, value FROM kv WHERE bucket = 'credential_keys';
	CREATE TABLE kv_decisions (key bytea PRIMARY KEY, value bytea NOT NULL);
	INSERT INTO kv_decisions SELECT key, value FROM kv WHERE bucket = 'decisions';
	CREATE TABLE kv_decisions_by_workflow (key bytea PRIMARY KEY, value bytea NOT NULL);
	INSERT INTO kv_decisions_by_workflow SELECT key, value FROM kv WHERE bucket = 'decisions_by_workflow';
	CREATE TABLE kv_lease_fences (key bytea PRIMARY KEY, value bytea NOT NULL);
	INSERT INTO kv_lease_fences SELECT key, value FROM kv WHERE bucket = 'lease_fences';
	CREATE TABLE kv_leases (key bytea PRIMARY KEY, value bytea NOT NULL);
	INSERT INTO kv_leases SELECT key, value FROM kv WHERE bucket = 'leases';
	CREATE TABLE kv_meta (key bytea PRIMARY KEY, value bytea NOT NULL);
	INSERT INTO kv_meta SELECT key, value FROM kv WHERE bucket = 'meta';
	CREATE TABLE kv_modes (key bytea PRIMARY KEY, value bytea NOT NULL);
	INSERT INTO kv_modes SELECT key, value FROM kv WHERE bucket = 'modes';
	CREATE TABLE kv_page_sessions (key bytea PRIMARY KEY, value bytea NOT NULL);
	INSERT INTO kv_page_sessions SELECT key, value FROM kv WHERE bucket = 'page_sessions';
	CREATE TABLE kv_refunds_by_order (key bytea PRIMARY KEY, value bytea NOT NULL);
	INSERT INTO kv_refunds_by_order SELECT key, value FROM kv WHERE bucket = 'refunds_by_order';
	CREATE TABLE kv_rejections (key bytea PRIMARY KEY, value bytea NOT NULL);
	INSERT INTO kv_rejections SELECT key, value FROM kv WHERE bucket = 'rejections';
	CREATE TABLE kv_reships_by_order (key bytea PRIMARY KEY, value bytea NOT NULL);
	INSERT INTO kv_reships_by_order SELECT key, value FROM kv WHERE bucket = 'reships_by_order';
	CREATE TABLE kv_spent_by_agent (key bytea PRIMARY KEY, value bytea NOT NULL);
	INSERT INTO kv_spent_by_agent SELECT key, value FROM kv WHERE bucket = 'spent_by_agent';
	CREATE TABLE kv_spent_by_agent_sums (key bytea PRIMARY KEY, value bytea NOT NULL);
	INSERT INTO kv_spent_by_agent_sums SELECT key, value FROM kv WHERE bucket = 'spent_by_agent_sums';
	CREATE TABLE kv_spent_by_order (key bytea PRIMARY KEY, value bytea NOT NULL);
	INSERT INTO kv_spent_by_order SELECT key, value FROM kv WHERE bucket = 'spent_by_order';
	CREATE TABLE kv_spent_by_rep (key bytea PRIMARY KEY, value bytea NOT NULL);
	INSERT INTO kv_spent_by_rep SELECT key, value FROM kv WHERE bucket = 'spent_by_rep';
	CREATE TABLE kv_spent_by_rep_sums (key bytea PRIMARY KEY, value bytea NOT NULL);
	INSERT INTO kv_spent_by_rep_sums SELECT key, value FROM kv WHERE bucket = 'spent_by_rep_sums';
	CREATE TABLE kv_steps (key bytea PRIMARY KEY, value bytea NOT NULL);
	INSERT INTO kv_steps SELECT key, value FROM kv WHERE bucket = 'steps';
	CREATE TABLE kv_switches (key bytea PRIMARY KEY, value bytea NOT NULL);
	INSERT INTO kv_switches SELECT key, value FROM kv WHERE bucket = 'switches';
	CREATE TABLE kv_workflows (key bytea PRIMARY KEY, value bytea NOT NULL);
	INSERT INTO kv_workflows SELECT key, value FROM kv WHERE bucket = 'workflows';
	CREATE TABLE kv_workflows_by_seq (key bytea PRIMARY KEY, value bytea NOT NULL);
	INSERT INTO kv_workflows_by_seq SELECT key, value FROM kv WHERE bucket = 'workflows_by_seq';
	CREATE TABLE kv_workflows_by_user (key bytea PRIMARY KEY, value bytea NOT NULL);
	INSERT INTO kv_workflows_by_user SELECT key, value FROM kv WHERE bucket = 'workflows_by_user';
	DROP TABLE kv;
	-- Every record at once, as version 1 held them, for a person reading
	-- the database (and backups that dump it).
	CREATE VIEW kv AS SELECT 'alerts'::text AS bucket, key, value FROM kv_alerts
		UNION ALL SELECT 'approvals'::text AS bucket, key, value FROM kv_approvals
		UNION ALL SELECT 'audit'::text AS bucket, key, value FROM kv_audit
		UNION ALL SELECT 'audit_pending'::text AS bucket, key, value FROM kv_audit_pending
		UNION ALL SELECT 'breakers'::text AS bucket, key, value FROM kv_breakers
		UNION ALL SELECT 'bundle_blobs'::text AS bucket, key, value FROM kv_bundle_blobs
		UNION ALL SELECT 'bundles'::text AS bucket, key, value FROM kv_bundles
		UNION ALL SELECT 'calls'::text AS bucket, key, value FROM kv_calls
		UNION ALL SELECT 'credential_keys'::text AS bucket, key, value FROM kv_credential_keys
		UNION ALL SELECT 'decisions'::text AS bucket, key, value FROM kv_decisions
		UNION ALL SELECT 'decisions_by_workflow'::text AS bucket, key, value FROM kv_decisions_by_workflow
		UNION ALL SELECT 'lease_fences'::text AS bucket, key, value FROM kv_lease_fences
		UNION ALL SELECT 'leases'::text AS bucket, key, value FROM kv_leases
		UNION ALL SELECT 'meta'::text AS bucket, key, value FROM kv_meta
		UNION ALL SELECT 'modes'::text AS bucket, key, value FROM kv_modes
		UNION ALL SELECT 'page_sessions'::text AS bucket, key, value FROM kv_page_sessions
		UNION ALL SELECT 'refunds_by_order'::text AS bucket, key, value FROM kv_refunds_by_order
		UNION ALL SELECT 'rejections'::text AS bucket, key, value FROM kv_rejections
		UNION ALL SELECT 'reships_by_order'::text AS bucket, key, value FROM kv_reships_by_order
		UNION ALL SELECT 'spent_by_agent'::text AS bucket, key, value FROM kv_spent_by_agent
		UNION ALL SELECT 'spent_by_agent_sums'::text AS bucket, key, value FROM kv_spent_by_agent_sums
		UNION ALL SELECT 'spent_by_order'::text AS bucket, key, value FROM kv_spent_by_order
		UNION ALL SELECT 'spent_by_rep'::text AS bucket, key, value FROM kv_spent_by_rep
		UNION ALL SELECT 'spent_by_rep_sums'::text AS bucket, key, value FROM kv_spent_by_rep_sums
		UNION ALL SELECT 'steps'::text AS bucket, key, value FROM kv_steps
		UNION ALL SELECT 'switches'::text AS bucket, key, value FROM kv_switches
		UNION ALL SELECT 'workflows'::text AS bucket, key, value FROM kv_workflows
		UNION ALL SELECT 'workflows_by_seq'::text AS bucket, key, value FROM kv_workflows_by_seq
		UNION ALL SELECT 'workflows_by_user'::text AS bucket, key, value FROM kv_workflows_by_user`,
	// 4: a statement that fails its transaction unless it counted one
	// row: an expectation (kvBucket.Expect) queued before the COMMIT of
	// the same round trip must stop that COMMIT, not just report.
	`CREATE FUNCTION countersign_expect(n bigint) RETURNS bigint LANGUAGE plpgsql AS $$
	BEGIN
		IF n <> 1 THEN
			RAISE EXCEPTION 'countersign: an expected record is not as expected' USING ERRCODE = 'CSX01';
		END IF;
		RETURN n;
	END $$`,
	// 5: the audit's signed checkpoints and the public keys that signed
	// them (executor/audit), and the view kv showing them too.
	`CREATE TABLE kv_audit_checkpoints (key bytea PRIMARY KEY, value bytea NOT NULL);
	CREATE TABLE kv_audit_keys (key bytea PRIMARY KEY, value bytea NOT NULL);
	CREATE OR REPLACE VIEW kv AS SELECT 'alerts'::text AS bucket, key, value FROM kv_alerts
		UNION ALL SELECT 'approvals'::text AS bucket, key, value FROM kv_approvals
		UNION ALL SELECT 'audit'::text AS bucket, key, value FROM kv_audit
		UNION ALL SELECT 'audit_pending'::text AS bucket, key, value FROM kv_audit_pending
		UNION ALL SELECT 'breakers'::text AS bucket, key, value FROM kv_breakers
		UNION ALL SELECT 'bundle_blobs'::text AS bucket, key, value FROM kv_bundle_blobs
		UNION ALL SELECT 'bundles'::text AS bucket, key, value FROM kv_bundles
		UNION ALL SELECT 'calls'::text AS bucket, key, value FROM kv_calls
		UNION ALL SELECT 'credential_keys'::text AS bucket, key, value FROM kv_credential_keys
		UNION ALL SELECT 'decisions'::text AS bucket, key, value FROM kv_decisions
		UNION ALL SELECT 'decisions_by_workflow'::text AS bucket, key, value FROM kv_decisions_by_workflow
		UNION ALL SELECT 'lease_fences'::text AS bucket, key, value FROM kv_lease_fences
		UNION ALL SELECT 'leases'::text AS bucket, key, value FROM kv_leases
		UNION ALL SELECT 'meta'::text AS bucket, key, value FROM kv_meta
		UNION ALL SELECT 'modes'::text AS bucket, key, value FROM kv_modes
		UNION ALL SELECT 'page_sessions'::text AS bucket, key, value FROM kv_page_sessions
		UNION ALL SELECT 'refunds_by_order'::text AS bucket, key, value FROM kv_refunds_by_order
		UNION ALL SELECT 'rejections'::text AS bucket, key, value FROM kv_rejections
		UNION ALL SELECT 'reships_by_order'::text AS bucket, key, value FROM kv_reships_by_order
		UNION ALL SELECT 'spent_by_agent'::text AS bucket, key, value FROM kv_spent_by_agent
		UNION ALL SELECT 'spent_by_agent_sums'::text AS bucket, key, value FROM kv_spent_by_agent_sums
		UNION ALL SELECT 'spent_by_order'::text AS bucket, key, value FROM kv_spent_by_order
		UNION ALL SELECT 'spent_by_rep'::text AS bucket, key, value FROM kv_spent_by_rep
		UNION ALL SELECT 'spent_by_rep_sums'::text AS bucket, key, value FROM kv_spent_by_rep_sums
		UNION ALL SELECT 'steps'::text AS bucket, key, value FROM kv_steps
		UNION ALL SELECT 'switches'::text AS bucket, key, value FROM kv_switches
		UNION ALL SELECT 'workflows'::text AS bucket, key, value FROM kv_workflows
		UNION ALL SELECT 'workflows_by_seq'::text AS bucket, key, value FROM kv_workflows_by_seq
		UNION ALL SELECT 'workflows_by_user'::text AS bucket, key, value FROM kv_workflows_by_user
		UNION ALL SELECT 'audit_checkpoints'::text AS bucket, key, value FROM kv_audit_checkpoints
		UNION ALL SELECT 'audit_keys'::text AS bucket, key, value FROM kv_audit_keys`,
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
