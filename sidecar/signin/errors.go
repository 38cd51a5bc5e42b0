package signin

import (
	"errors"
	"net/http"
)

// ErrInvalidOptions means New was given options it cannot work with; the
// message lists every problem at once.
var ErrInvalidOptions = errors.New("signin: invalid options")

// ErrDiscovery means the provider's discovery document could not be read
// or does not describe a provider this package can use.
var ErrDiscovery = errors.New("signin: provider discovery")

// Codes of the refusals of Finish and Verify (see the package doc).
const (
	CodeStateInvalid   = "oidc_state_invalid"
	CodeProviderError  = "oidc_provider_error"
	CodeExchangeFailed = "oidc_exchange_failed"
	CodeIDTokenInvalid = "oidc_id_token_invalid"
	CodeTokenExpired   = "token_expired"
	CodeNonceInvalid   = "oidc_nonce_invalid"
)

// Error is a refused sign-in or ID token: the HTTP status and stable code
// the page shows, and a message that says what to do (never a token).
type Error struct {
	Status  int
	Code    string
	Message string
	cause   error // for logs only
}

func (e *Error) Error() string {
	if e.cause != nil {
		return "signin: " + e.Code + ": " + e.Message + ": " + e.cause.Error()
	}
	return "signin: " + e.Code + ": " + e.Message
}

// Unwrap returns the underlying cause, if any.
func (e *Error) Unwrap() error { return e.cause }

func refuse(status int, code, msg string, cause error) *Error {
	return &Error{Status: status, Code: code, Message: msg, cause: cause}
}

func unauthorized(code, msg string, cause error) *Error {
	return refuse(http.StatusUnauthorized, code, msg, cause)
}
