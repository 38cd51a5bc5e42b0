package simhttp

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
)

// Fields are the members of one strictly decoded JSON object. Handlers take
// the fields they know; Done refuses whatever is left.
type Fields map[string]json.RawMessage

// Object decodes body as exactly one JSON object: no other JSON type, no
// duplicate keys (which decoders resolve differently), no trailing data.
// An empty body is an empty object when emptyOK.
func Object(body []byte, emptyOK bool) (Fields, error) {
	if emptyOK && len(bytes.TrimSpace(body)) == 0 {
		return Fields{}, nil
	}
	malformed := func(why string) error {
		return Errorf(http.StatusBadRequest, CodeMalformedJSON, "the body must be one JSON object: %s", why)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, malformed("it does not start with {")
	}
	f := Fields{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, malformed("bad member name")
		}
		key, ok := tok.(string)
		if !ok {
			return nil, malformed("bad member name")
		}
		if _, dup := f[key]; dup {
			return nil, Errorf(http.StatusUnprocessableEntity, CodeInvalidField, "%q appears twice", key)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, malformed("bad value of " + strconv.Quote(key))
		}
		f[key] = v
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, malformed("unterminated object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, malformed("data after the object")
	}
	return f, nil
}

func invalid(name, want string) error {
	return Errorf(http.StatusUnprocessableEntity, CodeInvalidField, "%s must be %s", name, want)
}

// String takes a required string field that matches pattern (nil: any
// non-empty string of at most 200 bytes).
func (f Fields) String(name string, pattern *regexp.Regexp) (string, error) {
	raw, ok := f[name]
	delete(f, name)
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
	raw, ok := f[name]
	delete(f, name)
	if !ok {
		return 0, nil
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
	raw, ok := f[name]
	delete(f, name)
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
