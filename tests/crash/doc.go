// Package crash holds the crash matrix with real processes: its test builds
// countersign with -tags failpoints, lets the process kill itself with
// SIGKILL at each failpoint of the step engine (before_dispatch,
// after_dispatch, after_record) while it runs a refund or a reshipment,
// starts a new process over the same data directory, resumes, and counts the
// effects in the ledger and the order system. It runs the matrix on the
// designed system and again with the write-ahead record removed (and the
// order system's reference key, which alone would catch the same crash),
// and asserts both columns: the removal must show as a second reshipment.
// TestKillWhileOpening kills it at after_open, inside the transaction that
// opens a workflow with its first step, and finds neither after restart.
//
// The package has no code of its own; the test is long (it builds the
// binary and starts 24 processes) and is skipped under -short.
package crash
