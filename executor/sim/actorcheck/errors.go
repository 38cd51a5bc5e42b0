package actorcheck

import (
	"errors"
	"net/http"
)

// Refusal codes, in the order the checks run. They are part of the systems of
// record's HTTP contract: clients and tests match on them.
const (
	CodeTokenMissing   = "token_missing"
	CodeTokenMalformed = "token_malformed"
	CodeAlgNotAllowed  = "alg_not_allowed"
	CodeNotActorToken  = "not_actor_token"
	CodeEpochRevoked   = "epoch_revoked"
	CodeUnknownKid     = "unknown_kid"
	CodeBadSignature   = "bad_signature"
	CodeExpMissing     = "exp_missing"
	CodeTokenExpired   = "token_expired"
	CodeTokenLifetime  = "token_lifetime"
	CodeTokenReplayed  = "token_replayed"
	CodeWrongAudience  = "wrong_audience"
	CodeWrongScope     = "wrong_scope"
	CodeCallMismatch   = "call_mismatch"
	CodeKeyMismatch    = "key_mismatch"
	CodeRefMismatch    = "reference_mismatch"
	CodeLineMismatch   = "line_mismatch"
	CodeAmountAboveMax = "amount_above_max"
)

// Refusal is the receiver's answer to a token it does not accept. Status is
// 401 when the token itself is not trusted and 403 when a trusted token does
// not cover this request.
type Refusal struct {
	Status  int
	Code    string
	Message string
}

func (r *Refusal) Error() string {
	return "actor token refused: " + r.Code + ": " + r.Message
}

func unauthorized(code, msg string) *Refusal {
	return &Refusal{Status: http.StatusUnauthorized, Code: code, Message: msg}
}

func forbidden(code, msg string) *Refusal {
	return &Refusal{Status: http.StatusForbidden, Code: code, Message: msg}
}

// ErrKeysUnavailable means the JWKS could not be fetched or parsed. The
// verifier fails closed: it accepts nothing it cannot check against the
// current keys, and the server answers 503.
var ErrKeysUnavailable = errors.New("actorcheck: the sidecar's JWKS is unavailable")
