package simhttp

import (
	"bytes"
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strconv"

	"github.com/countersign/countersign/executor/strictjson"
)

// Fields are the members of one strictly decoded JSON object. Handlers take
// the fields they know; Done refuses whatever is left. A member named like a
// field but for case ("Amount") is found when the handler takes that field,
// so a body whose earlier field is invalid answers that 422 first.
type Fields map[string]json.RawMessage

// Object decodes body as exactly one JSON object with strictjson: no other
// JSON type, no duplicate or case-variant names at any depth (which readers
// resolve differently), no trailing data; all of those are 400
// malformed_json. An empty body is an empty object when emptyOK.
func Object(body []byte, emptyOK bool) (Fields, error) {
	if emptyOK && len(bytes.TrimSpace(body)) == 0 {
		return Fields{}, nil
	}
	m, err := strictjson.Object(body)
	if err != nil {
		return nil, Errorf(http.StatusBadRequest, CodeMalformedJSON, "the body must be one JSON object: %v", err)
	}
	return Fields(m), nil
}

// take removes the field name; a member named like it but for case is 400
// malformed_json, never matched and never left for Done to call unknown.
func (f Fields) take(name string) (json.RawMessage, bool, error) {
	raw, ok, err := strictjson.Members(f).Take(name)
	if err != nil {
		return nil, false, Errorf(http.StatusBadRequest, CodeMalformedJSON, "%v", err)
	}
	return raw, ok, nil
}

// Raw takes an optional field as it was sent; ok is false when absent.
func (f Fields) Raw(name string) (raw json.RawMessage, ok bool, err error) {
	return f.take(name)
}

func invalid(name, want string) error {
	return Errorf(http.StatusUnprocessableEntity, CodeInvalidField, "%s must be %s", name, want)
}

// String takes a required string field that matches pattern (nil: any
// non-empty string of at most 200 bytes).
func (f Fields) String(name string, pattern *regexp.Regexp) (string, error) {
	raw, ok, err := f.take(name)
	if err != nil {
		return "", err
	}
	want := "a non-empty string"
	if pattern != nil {
		want = "a string matching " + pattern.String()
	}
	if !ok || len(raw) == 0 || raw[0] != '"' {
		return "", invalid(name, want)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", invalid(name, want)
	}
	if (pattern != nil && !pattern.MatchString(s)) || (pattern == nil && (s == "" || len(s) > 200)) {
		return "", invalid(name, want)
	}
	return s, nil
}

// Count takes an optional non-negative integer field (absent is 0).
func (f Fields) Count(name string) (int, error) {
	raw, ok, err := f.take(name)
	if err != nil || !ok {
		return 0, err
	}
	n, err := digits(raw)
	if err != nil || n > 1<<31-1 {
		return 0, invalid(name, "a non-negative integer")
	}
	return int(n), nil
}

// Cents takes a required positive integer field: a JSON integer literal, no
// fraction, exponent, sign or quotes (3000 is $30.00).
func (f Fields) Cents(name string) (int64, error) {
	raw, ok, err := f.take(name)
	if err != nil {
		return 0, err
	}
	n, err := digits(raw)
	if !ok || err != nil || n <= 0 {
		return 0, invalid(name, "a positive integer number of cents (3000 is $30.00)")
	}
	return n, nil
}

func digits(raw json.RawMessage) (int64, error) {
	if len(raw) == 0 {
		return 0, strconv.ErrSyntax
	}
	for _, c := range raw {
		if c < '0' || c > '9' {
			return 0, strconv.ErrSyntax
		}
	}
	return strconv.ParseInt(string(raw), 10, 64)
}

// Done refuses any field not taken.
func (f Fields) Done() error {
	if len(f) == 0 {
		return nil
	}
	names := make([]string, 0, len(f))
	for k := range f {
		names = append(names, strconv.Quote(k))
	}
	slices.Sort(names)
	return Errorf(http.StatusUnprocessableEntity, CodeUnknownField, "unknown field %s", names[0])
}

// ReadObject reads the request body (413 beyond MaxBodyBytes) and decodes it
// with Object.
func ReadObject(w http.ResponseWriter, r *http.Request, emptyOK bool) (Fields, error) {
	body, err := ReadBody(w, r)
	if err != nil {
		return nil, err
	}
	return Object(body, emptyOK)
}
