package dispatch

import (
	"errors"
	"fmt"
	"net/http"
)

// ErrOutcomeUnknown: a request was sent and no usable answer came back, so
// the effect may or may not have happened. Match with errors.Is; the
// wrapped error says what was lost.
var ErrOutcomeUnknown = errors.New("dispatch: outcome unknown: the request was sent and no answer came back")

// Refused is a system of record's 4xx answer: it did nothing and will do
// nothing if asked the same again. Never retried.
type Refused struct {
	System  string // "ledger" or "orders"
	Status  int
	Code    string // the receiver's stable code, e.g. "amount_above_max"
	Message string
}

func (e *Refused) Error() string {
	return fmt.Sprintf("dispatch: %s refused (%d %s): %s", e.System, e.Status, e.Code, e.Message)
}

// NotFound reports whether the system answered 404 (no such order, entry
// or key).
func (e *Refused) NotFound() bool { return e.Status == http.StatusNotFound }

// Transient is a failure before any effect: no connection, or a 5xx answer
// from the system. Trying again later is safe.
type Transient struct {
	System  string
	Status  int    // 0 when no answer came (could not connect)
	Code    string // the receiver's code for a 5xx, when it sent one
	Message string
	Err     error // the transport error, when there was no answer
}

func (e *Transient) Error() string {
	if e.Status == 0 {
		return fmt.Sprintf("dispatch: %s unreachable, nothing was sent: %v", e.System, e.Err)
	}
	return fmt.Sprintf("dispatch: %s failed before any effect (%d %s): %s", e.System, e.Status, e.Code, e.Message)
}

func (e *Transient) Unwrap() error { return e.Err }

// IsNotFound reports whether err is a 404 refusal.
func IsNotFound(err error) bool {
	var r *Refused
	return errors.As(err, &r) && r.NotFound()
}
