// Package store is countersign's durable state: workflows, steps,
// approvals, tool switches, the decision log, the bundle history, and the
// indexes that let a decision read every fact it needs without scanning all
// steps. It lives in a bbolt file (Open), the embedded default for one
// sidecar, or in a PostgreSQL database (OpenPostgres), which several
// sidecars can share.
//
// # Transactions
//
// All access goes through View, Update and Batch, which hand the caller a
// Tx with typed methods. The engine evaluates policy on facts read in a
// View, then admits, checks those facts unchanged (deciding again inside
// the transaction when they changed), appends the decision and marks the
// step started in ONE Batch, so two concurrent calls can never both spend
// the same headroom: bbolt has one writer at a time, and PostgreSQL runs
// every write SERIALIZABLE.
//
// A write function may run more than once: on bbolt when another function
// of its group commit fails (Batch is a group commit, package
// groupcommit: concurrent writers share one commit and its fsyncs), on
// PostgreSQL when it loses a serialization conflict. It computes
// everything from its Tx and sets its outcome afresh on each run (Update).
//
// # Two backends, one set of accessors
//
// Every accessor is written once, against buckets of ordered keys as bbolt
// keeps them: get, put, delete, a cursor, a range, a sequence per bucket
// (kv.go). bbolt implements them with its own buckets (bolt.go); the
// PostgreSQL backend with rows (postgres.go, pgkv.go), and the same tests
// run on both.
//
// # PostgreSQL
//
// The schema is created and migrated by OpenPostgres: numbered migrations,
// recorded in schema_migrations and applied in one transaction under an
// advisory lock, so sidecars starting together do not race, and a database
// migrated by a newer binary is refused (ErrSchemaNewer).
//
// Version 1 keeps the buckets as rows of one table, kv (bucket, key bytea,
// value bytea, primary key (bucket, key)). It is the smallest schema that
// runs the accessors unchanged: bytea orders bytewise as bbolt's keys do,
// the primary key is the ordered index a cursor pages through, and the
// time-ordered keys, running sums and indexes the accessors maintain work
// the same. Its cost is a round trip per key read and values opaque to
// SQL; tables of typed columns (and totals read in one query) can replace
// buckets one at a time with later migrations, behind the same Tx methods.
// Version 2 numbers keys from PostgreSQL sequences, one per bucket that
// numbers its keys and one per named counter, instead of counter rows.
// Version 3 gives every bucket a table of its own, kv_<bucket> (key,
// value), and keeps kv as a read-only view of them all: PostgreSQL's
// SERIALIZABLE watches what a transaction read by index page, and in one
// table the rows of neighbouring buckets shared pages, so writers of
// unrelated records conflicted through them. Sessions run with
// enable_seqscan off: every statement reads by key or key range, and a
// small table scanned whole would be watched whole.
//
// A decision reads a dozen records before it writes. Tx.Prefetch reads
// them ahead in one round trip (one statement per bucket, and one per
// window total, sent in one batch with the queued writes), and the
// accessors then answer from what it read and from the transaction's own
// writes since.
//
// # A fleet without a shared lock
//
// A write transaction runs SERIALIZABLE and runs again on a serialization
// failure or a deadlock (up to PostgresOptions.MaxAttempts, then
// ErrConflict): PostgreSQL finds the read-then-write races between
// sidecars, such as two decisions each reading the headroom the other
// spends, without each accessor naming the rows to lock. No lock is
// shared by the fleet, so writers that touch different rows never wait
// for each other; and the rows every writer would otherwise touch are
// kept apart:
//
//   - numbers (decisions, workflows, approvals, fences) come from
//     sequences, which are not transactional: no two transactions wait or
//     conflict on one, and a number is never handed out twice, but numbers
//     have gaps and need not commit in their order (a page of the decision
//     log read while decisions commit may miss one that commits later with
//     a smaller number);
//   - the audit chain's head: on a shared store an audit record is
//     written pending, with a sequence number, and one sidecar at a time
//     chains the pending records in batches (package audit, Sequence);
//   - the running sums of the spending indexes: each open of the store
//     writes sums of its own partition (spent.go), read together.
//
// Within one process, the writes that read and write the same rows (every
// refund decision reads and adds to the agent's hour) queue on a lane
// (BatchIn) rather than abort each other; across processes PostgreSQL
// orders them. A read (View) runs in one REPEATABLE READ, READ ONLY
// snapshot. Batch is one transaction per function, as PostgreSQL shares
// the WAL flush of concurrent commits itself. A statement that fails (a
// lost connection, a conflict) fails the whole transaction: the
// accessors that cannot return an error (Switch, OrderSpent, ...) may
// read nil, and whatever the function decides from it is rolled back
// while the caller gets the failure.
//
// # Indexes
//
// A refund step counts as spent while its status is started, unknown or
// done. PutStep keeps three indexes in step with those transitions: the total
// per order, and two time-ordered indexes (per rep, and across the agent),
// each with running sums per hour, minute and second kept in the same
// transaction. A rolling-window total reads the whole hours, minutes and
// seconds inside the window and only the entries of the partial second at
// its start (spent.go). The cost of a decision therefore grows neither with
// the whole history nor with the refunds inside the window.
//
// The same transitions keep each order's list of its spent refunds
// (OrderRefunds: workflow, step, rep, amount), which a lead reviewing a
// request on the order is shown; a store written before the list existed
// gets it built once at open.
//
// A reship step counts for its order in the same statuses; PutStep keeps a
// count per order (OrderReships), across all workflows, so the rules can
// limit how often one order is reshipped with one key read.
//
// CreateWorkflow numbers each workflow in the order of creation and indexes
// it by that number and by user (workflowindex.go), so that a page of one
// rep's workflows (WorkflowPage) reads only theirs, from a cursor.
//
// # The decision log
//
// Decisions are keyed by sequence number, with an index by workflow; each
// record holds the input document the policy evaluated, so a candidate
// bundle can be replayed against it (package impact). The log is read a
// page at a time (EachDecision, DecisionPage): a page seeks to a cursor, to
// a time by binary search over the sequence numbers, and along the workflow
// index, so its cost does not grow with the log.
//
// # What it does not know
//
// The store knows no policy, no HTTP and no system of record. It stores
// records and keeps its indexes consistent with them; the meaning of a status
// belongs to the engine.
package store
