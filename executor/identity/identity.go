// Package identity compares the people behind bearer tokens. Two subs
// name the same person when their PRECIS UsernameCaseMapped forms
// (RFC 8265) are equal: OPS-IDA, ops-ida and fullwidth ＯＰＳ－ＩＤＡ are
// one operator, so a second-operator rule or a requester-versus-approver
// rule cannot be talked around by spelling. A sub that the profile
// refuses (spaces, controls, a Bidi Rule failure, the empty string) names
// nobody: authentication refuses it, so no check ever sees one.
//
// Confusables across scripts (a Cyrillic і for a Latin i) are not folded:
// PRECIS does not, and an identity provider issuing such a sub issues a
// different person.
package identity

import (
	"errors"
	"fmt"

	"golang.org/x/text/secure/precis"
)

// ErrInvalid means a sub that UsernameCaseMapped refuses, or an empty one.
var ErrInvalid = errors.New("identity: not a valid username")

// Canonical is sub's UsernameCaseMapped form, the one every same-person
// check compares, or ErrInvalid.
func Canonical(sub string) (string, error) {
	if sub == "" {
		return "", fmt.Errorf("%w: empty", ErrInvalid)
	}
	c, err := precis.UsernameCaseMapped.String(sub)
	if err != nil || c == "" {
		return "", fmt.Errorf("%w: %q: %v", ErrInvalid, truncate(sub), err)
	}
	return c, nil
}

// Same reports whether a and b name the same person. Where either is not
// a valid username it falls back to byte equality, so that an id that
// reached a record some other way (an in-process driver) is still never
// taken for someone else it equals exactly.
func Same(a, b string) bool {
	ca, errA := Canonical(a)
	cb, errB := Canonical(b)
	if errA != nil || errB != nil {
		return a == b
	}
	return ca == cb
}

// truncate bounds what an error repeats of untrusted input.
func truncate(s string) string {
	const n = 64
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
