package strictjson

import (
	"errors"
	"fmt"
)

// The kinds of refusal. An *Error carries exactly one of them; match with
// errors.Is.
var (
	// ErrMalformed: the body is not one unambiguous JSON value (a syntax
	// error, trailing data, a duplicate or case-variant member name). HTTP
	// callers answer 400: the sender must fix how it writes JSON.
	ErrMalformed = errors.New("malformed JSON")
	// ErrUnknownField: a member the target has no field for. HTTP callers
	// answer 422: the sender must drop the member.
	ErrUnknownField = errors.New("unknown field")
	// ErrType: a value of the wrong type or range for its field. HTTP
	// callers answer 422: the sender must fix the value.
	ErrType = errors.New("wrong type")
)

// Error is a refusal: its Kind, where it is and what is wrong.
type Error struct {
	Kind    error  // ErrMalformed, ErrUnknownField or ErrType
	Path    string // the member's path, such as args.order; "" for the whole body
	Problem string // for a person: what is wrong and how to fix it
}

func (e *Error) Error() string {
	if e.Path == "" {
		return fmt.Sprintf("%v: %s", e.Kind, e.Problem)
	}
	return fmt.Sprintf("%v at %s: %s", e.Kind, e.Path, e.Problem)
}

// Unwrap makes errors.Is(err, ErrMalformed) and the like work.
func (e *Error) Unwrap() error { return e.Kind }
