// Package controls holds the control-removal matrix as Go tests: every
// control of the engine is shown to be load-bearing by running its
// scenario against the real ledger, order system and sidecar twice, once
// designed (the invariant holds) and once with the control removed (the
// invariant breaks). A removal that goes undetected fails the suite. The
// matrix runs twice: with each stack's store in bbolt, and in a
// PostgreSQL database of its own (skipped, with one line naming
// `bash .ci/run`, where PostgreSQL is not installed).
//
// The scenarios live in cmd/scenario/demo, so `countersign demo` prints the
// same matrix from the same code. Run with -v to see each row:
//
//	go test -v ./tests/controls
package controls
