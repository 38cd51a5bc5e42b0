package engine

import (
	"fmt"
	"regexp"
	"unicode"
	"unicode/utf8"

	"github.com/countersign/countersign/executor/audit"
)

// idPattern is what a workflow id and a ticket may be: short, and plain
// enough for a URL path, a bbolt key and a log line.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// MaxCommentBytes bounds an approval, rejection, ratification or reversal
// comment.
const MaxCommentBytes = 1000

// checkID refuses a workflow id or ticket (field names which) that breaks
// the pattern, that a URL path would read as a directory, or that looks
// like a bearer token. '.' is allowed, so a JWT (three base64url parts
// joined by dots) matches the pattern; it is refused here, with a message
// that says why, rather than accepted and then refused by the audit log at
// every step.
func checkID(field, v string) error {
	switch {
	case !idPattern.MatchString(v):
		return &InvalidError{field, "required; 1 to 64 of A-Z a-z 0-9 . _ - (^[A-Za-z0-9._-]{1,64}$)"}
	case v == "." || v == "..":
		return &InvalidError{field, "must not be . or .., which a URL path reads as a directory"}
	case audit.LooksLikeToken(v):
		return &InvalidError{field, "looks like a bearer token (a JWT); never put a token in an id: use the ticket's own number"}
	}
	return nil
}

// checkComment refuses a comment a lead wrote that is too long, not UTF-8,
// holds control characters (which forge lines in logs and pages), or looks
// like a bearer token. A token is refused, not redacted: the lead learns at
// once that they pasted a credential, and the record never holds something
// other than what they wrote.
func checkComment(c string) error { return checkText("comment", c) }

// CheckReason checks the reason a person gives for an action recorded
// outside the engine (an epoch raise) as the engine checks its own.
func CheckReason(reason string) error { return checkText("reason", reason) }

// MaxAgentReason bounds the reason an agent gives for a call, in
// characters: a sentence or two for a lead to read on the card.
const MaxAgentReason = 500

// checkAgentReason refuses an agent's reason for a call that is too long,
// or that checkContent refuses in a comment.
func checkAgentReason(r string) error {
	if n := utf8.RuneCountInString(r); n > MaxAgentReason {
		return &InvalidError{"reason", fmt.Sprintf("at most %d characters, got %d; shorten it", MaxAgentReason, n)}
	}
	return checkContent("reason", r)
}

// checkText checks a person's free text (a comment, a reason) before it
// goes into a record.
func checkText(field, c string) error {
	if len(c) > MaxCommentBytes {
		return &InvalidError{field, fmt.Sprintf("at most %d bytes; shorten it", MaxCommentBytes)}
	}
	return checkContent(field, c)
}

// checkContent refuses text that is not UTF-8, holds control characters
// or looks like a bearer token.
func checkContent(field, c string) error {
	switch {
	case !utf8.ValidString(c):
		return &InvalidError{field, "must be UTF-8 text"}
	case hasControl(c):
		return &InvalidError{field, "must not hold control characters (newlines, tabs, escapes): write it on one line"}
	case audit.LooksLikeToken(c):
		return &InvalidError{field, "looks like a bearer token (a JWT); remove it: a token must never be written into a record"}
	}
	return nil
}

func hasControl(s string) bool {
	for _, r := range s {
		if unicode.IsControl(r) {
			return true
		}
	}
	return false
}
