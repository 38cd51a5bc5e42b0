package audit

import "errors"

// Errors callers branch on.
var (
	// ErrInvalid: the record misses a field every record needs (Kind,
	// Actor) or holds arguments that are not JSON. A programming error in
	// the caller; its transaction should fail.
	ErrInvalid = errors.New("invalid audit record")
	// ErrToken: the record holds a value that looks like a JWT. Tokens are
	// never recorded (see the package documentation); record the jti.
	ErrToken = errors.New("audit record holds a token")
	// ErrVersion: a record names a hash rule (Version) this build does
	// not know: it was written by a newer countersign.
	ErrVersion = errors.New("audit record of an unknown hash version")
	// ErrKey: a key file that does not hold an Ed25519 key in a form
	// this package reads (the message says which forms).
	ErrKey = errors.New("not an Ed25519 audit key")
	// ErrCheckpoint: a checkpoint that does not decode, or whose
	// signature does not verify with the key it names.
	ErrCheckpoint = errors.New("audit checkpoint does not verify")
	// ErrCursor: the after cursor of List is not a record id.
	ErrCursor = errors.New("audit cursor is not a record id")
)
