package reconcile

import "errors"

// Errors callers branch on.
var (
	// ErrOptions: Options lack a required input or hold an invalid value;
	// the message lists every problem.
	ErrOptions = errors.New("reconcile: invalid options")
	// ErrRead: one of the inputs could not be read, so no report was made.
	// The message names the input (the agent's records, the ledger or the
	// order system).
	ErrRead = errors.New("reconcile: input unreadable")
)
