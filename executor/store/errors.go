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
)
