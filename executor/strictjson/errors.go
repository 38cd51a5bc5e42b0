package strictjson

import (
	"errors"
	"fmt"
	"unicode/utf8"
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

// Error says what is wrong, repeating at most the start of a long path or
// problem: both may carry what the sender wrote (a member's name, a
// number's digits), and an answer must not grow with the input.
func (e *Error) Error() string {
	if e.Path == "" {
		return fmt.Sprintf("%v: %s", e.Kind, clip(e.Problem, maxProblem))
	}
	return fmt.Sprintf("%v at %s: %s", e.Kind, clip(e.Path, maxPath), clip(e.Problem, maxProblem))
}

// How much of a path and a problem Error repeats.
const (
	maxPath    = 128
	maxProblem = 256
)

// clip is s whole up to max bytes, else its start (whole runes) and its
// length.
func clip(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", s[:cut], len(s))
}

// Unwrap makes errors.Is(err, ErrMalformed) and the like work.
func (e *Error) Unwrap() error { return e.Kind }
