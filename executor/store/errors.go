package store

import "errors"

// Errors callers branch on.
var (
	// ErrNotFound: no record with that key.
	ErrNotFound = errors.New("not found")
	// ErrExists: a record with that key already exists.
	ErrExists = errors.New("already exists")
	// ErrLocked: another process holds the database file. countersign is a
	// single writer per data dir; stop the other process or use another dir.
	ErrLocked = errors.New("database is locked by another process")
	// ErrUnwritable: the database file or its directory cannot be created
	// or written (no permission, a read-only file system, or a path through
	// a regular file). Use a directory this process can write.
	ErrUnwritable = errors.New("database directory is not writable")
	// ErrFenced: a write checked the fencing number of a workflow's lease
	// (Tx.CheckFence) and found another: the lease was taken over since,
	// so this writer no longer drives the workflow. Nothing of the
	// transaction committed; it must not be retried.
	ErrFenced = errors.New("the workflow's lease was taken over: fenced off")
)

// Errors of the PostgreSQL backend.
var (
	// ErrConflict: a write transaction kept losing serialization conflicts
	// (or deadlocks) with concurrent writers and was given up. Nothing of
	// it committed; the call may be retried.
	ErrConflict = errors.New("write transaction kept conflicting with concurrent writers")
	// ErrUnavailable: PostgreSQL could not be reached, or stopped answering,
	// within the transaction (a refused or broken connection, a timeout).
	// A write that failed so may or may not have committed; retry it.
	ErrUnavailable = errors.New("the store cannot be reached")
	// ErrSchemaNewer: the database was migrated by a newer countersign.
	// Run that version (or newer) against it.
	ErrSchemaNewer = errors.New("database schema is newer than this binary")
)
