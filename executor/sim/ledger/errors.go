package ledger

import "errors"

// Error codes of the ledger's answers beyond those of actorcheck and
// simhttp.
const (
	// CodeKeyMissing: 400, a refund without an Idempotency-Key.
	CodeKeyMissing = "idempotency_key_missing"
	// CodeKeyReused: 409, the Idempotency-Key was used with other
	// parameters.
	CodeKeyReused = "idempotency_key_reused"
	// CodeAlreadyReversed: 409, the entry already has a reversal.
	CodeAlreadyReversed = "already_reversed"
	// CodeNotReversible: 409, the entry is itself a reversal.
	CodeNotReversible = "not_reversible"
	// CodeLineCheckUnavailable: 503, a line-item refund that the order
	// system could not check (unreachable, or not configured).
	CodeLineCheckUnavailable = "line_check_unavailable"
)

// ErrNotFound: no entry for the key asked for.
var ErrNotFound = errors.New("ledger: not found")
