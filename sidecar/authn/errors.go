package authn

import (
	"errors"
	"net/http"
)

// ErrUnauthenticated is matched (errors.Is) by every refusal of a bearer
// token: the caller answers 401 with WWW-Authenticate: Bearer and the
// *Error's code and message.
var ErrUnauthenticated = errors.New("authn: unauthenticated")

// ErrInvalidOptions means New was given a configuration it cannot work
// with; the message lists every problem at once.
var ErrInvalidOptions = errors.New("authn: invalid options")

// Code is the stable, machine-readable reason a token was refused. It is
// the API's error.code; clients may switch on it.
type Code string

// Refusal codes, in the order Verify checks them.
const (
	CodeTokenMissing   Code = "token_missing"       // no Authorization header, or not the Bearer scheme
	CodeTokenMalformed Code = "token_malformed"     // not a compact JWS with JSON object header and payload, a member name twice (or in two cases), two Authorization headers, or crit
	CodeAlgNotAllowed  Code = "alg_not_allowed"     // alg is not EdDSA, ES256 or RS256 (none, HS256 ...)
	CodeWrongIssuer    Code = "wrong_issuer"        // iss is not a trusted issuer
	CodeUnknownKid     Code = "unknown_kid"         // no kid, or kid not in the issuer's JWKS even after a refresh
	CodeBadSignature   Code = "bad_signature"       // the signature does not verify with the issuer's key for kid
	CodeExpMissing     Code = "exp_missing"         // no exp claim: every token must expire
	CodeTokenExpired   Code = "token_expired"       // exp is not after now (minus the leeway)
	CodeNotYetValid    Code = "token_not_yet_valid" // nbf or iat is in the future (beyond the leeway)
	CodeWrongAudience  Code = "wrong_audience"      // aud does not contain the sidecar's audience
	CodeBadClaims      Code = "bad_claims"          // sub, role, region, scopes, refund_ceiling or approve_limit missing or mistyped; sub not a short printable word or not a PRECIS username; exp, nbf or iat not a number
)

// Error is a refused bearer token. Code is stable for clients; Message
// says what to do and is safe to show (it never contains the token).
// Every *Error matches ErrUnauthenticated.
type Error struct {
	Code    Code
	Message string
	cause   error // detail from jwx or the source, for logs only
}

func (e *Error) Error() string {
	if e.cause != nil {
		return "authn: " + string(e.Code) + ": " + e.Message + ": " + e.cause.Error()
	}
	return "authn: " + string(e.Code) + ": " + e.Message
}

// Is makes every *Error match ErrUnauthenticated.
func (e *Error) Is(target error) bool { return target == ErrUnauthenticated }

// Unwrap returns the underlying cause, if any.
func (e *Error) Unwrap() error { return e.cause }

// Status is the HTTP status for the refusal: always 401, because the
// caller is not authenticated (authorization failures are 403 elsewhere).
func (e *Error) Status() int { return http.StatusUnauthorized }

func refuse(code Code, msg string, cause error) *Error {
	return &Error{Code: code, Message: msg, cause: cause}
}
