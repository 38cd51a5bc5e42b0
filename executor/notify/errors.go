package notify

import "errors"

// Errors of Verify, for a receiver to tell apart.
var (
	// ErrSignatureMalformed: the header is not t=<unix seconds>,v1=<hex>.
	ErrSignatureMalformed = errors.New("malformed signature header")
	// ErrSignatureMismatch: no v1 is the HMAC of t and the body under the
	// secret (another secret, or a body changed on the way).
	ErrSignatureMismatch = errors.New("signature does not match the body: check that sender and receiver share the secret and that the body is the raw bytes received")
	// ErrSignatureStale: the signature is genuine but its time is too far
	// from the receiver's clock (a replay, or a clock that is off).
	ErrSignatureStale = errors.New("signature time outside the tolerance: a replayed notice, or a clock that is off")
)

// Errors of ReadSecretFile and New.
var (
	// ErrNoSecret: the secret file is empty, or no secret was given.
	ErrNoSecret = errors.New("no webhook secret")
)
