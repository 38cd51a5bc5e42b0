package strictjson

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Members are the members of one object, by exact name, each value as sent
// (white space around it trimmed).
type Members map[string]json.RawMessage

// Object splits data, exactly one JSON object, into its members after the
// checks of [Decode] that need no target: syntax, trailing data, duplicate
// and case-variant names in every object at any depth. Anything but an
// object is an ErrType. Case variants of the names the caller expects are
// refused by [Members.Take]; members left after the caller took its fields
// are the unknown ones.
func Object(data []byte) (Members, error) {
	if err := checkSyntax(data); err != nil {
		return nil, err
	}
	if v := bytes.TrimSpace(data); v[0] != '{' {
		return nil, &Error{Kind: ErrType, Problem: "must be a JSON object"}
	}
	var m Members
	if err := Decode(data, &m); err != nil {
		return nil, err
	}
	for k, v := range m {
		m[k] = bytes.TrimSpace(v)
	}
	return m, nil
}

// Take removes the member name and returns its value, and whether it was
// there. A member whose name differs from name only in case is malformed:
// it is neither taken nor left to be reported as unknown.
func (m Members) Take(name string) (json.RawMessage, bool, error) {
	if v, ok := m[name]; ok {
		delete(m, name)
		return v, true, nil
	}
	want := fold(name)
	for k := range m {
		if fold(k) == want {
			return nil, false, &Error{Kind: ErrMalformed, Path: k,
				Problem: fmt.Sprintf("the member is named %q, not %q: names are case-sensitive", name, k)}
		}
	}
	return nil, false, nil
}
