// Package store is countersign's durable state on bbolt: workflows, steps,
// approvals, tool switches, the decision log, the bundle history, and the
// indexes that let a decision read every fact it needs without scanning all
// steps.
//
// # Transactions
//
// All access goes through View, Update and Batch, which hand the caller a
// Tx with typed methods. Batch is a group commit (package groupcommit):
// concurrent writers share one commit and its fsyncs, and a write function
// may run more than once. The engine evaluates policy on facts read in a
// View, then admits, checks those facts unchanged (deciding again inside
// the transaction when they changed), appends the decision and marks the
// step started in ONE Batch. bbolt serializes writers, so two concurrent
// calls can never both spend the same headroom.
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
