package credential

import (
	"errors"
	"fmt"
)

// Errors returned by the Authority. Match them with errors.Is; a
// *ClaimError also matches ErrInvalidClaims and names the claim with
// errors.As.
var (
	// ErrInvalidClaims means Mint was asked for a token with a required
	// claim missing or out of range. It is a bug in the caller (the engine
	// must always know whom it acts for, where, and for which call), so
	// the call must not be dispatched.
	ErrInvalidClaims = errors.New("credential: invalid claims")

	// ErrInvalidOptions means Open was given options it cannot work with.
	ErrInvalidOptions = errors.New("credential: invalid options")

	// ErrKeyStore means a persisted signing key could not be read, parsed
	// or written. The Authority does not fall back to a fresh key: doing
	// so would silently change the published JWKS under the receivers.
	ErrKeyStore = errors.New("credential: key store")

	// ErrEpochConflict means the key file for the next epoch already exists
	// on disk, so another process is raising epochs in the same data
	// directory. Only one sidecar may own a data directory.
	ErrEpochConflict = errors.New("credential: epoch already exists on disk")

	// ErrKeyEncryptionKey means the key-encryption key is missing,
	// malformed, or not the one the fleet's signing keys in the store
	// were sealed with. The message says which and what to do; a sidecar
	// must not start without the right one.
	ErrKeyEncryptionKey = errors.New("credential: key-encryption key")

	// ErrDeadlinePassed means Mint was asked for a token whose NotAfter
	// leaves it no life: the step's token deadline has passed. Nothing
	// was minted and nothing may be sent; the engine extends the deadline
	// durably before it asks again.
	ErrDeadlinePassed = errors.New("credential: token deadline passed")
)

// ClaimError reports which claim made Mint refuse. It matches
// ErrInvalidClaims with errors.Is.
type ClaimError struct {
	Claim  string // the JWT claim name: "sub", "act", "aud", "scope", "max", "call"
	Reason string // what is wrong with it
}

func (e *ClaimError) Error() string {
	return fmt.Sprintf("credential: claim %q %s", e.Claim, e.Reason)
}

// Is reports whether target is ErrInvalidClaims.
func (e *ClaimError) Is(target error) bool { return target == ErrInvalidClaims }
