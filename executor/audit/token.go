package audit

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// findToken returns the path of the first string in the record that holds
// something shaped like a JWT, or "" when there is none. The path names the
// field, never the value: the error it ends up in may be logged.
func findToken(r Record) string {
	for _, f := range []struct{ path, v string }{
		{"kind", string(r.Kind)}, {"actor", r.Actor}, {"workflow", r.Workflow}, {"tool", r.Tool},
	} {
		if looksLikeJWT(f.v) {
			return f.path
		}
	}
	if len(r.Args) > 0 {
		var v any
		if json.Unmarshal(r.Args, &v) == nil {
			if p := findTokenIn("args", v); p != "" {
				return p
			}
		} else if looksLikeJWT(string(r.Args)) {
			return "args"
		}
	}
	if r.Detail != nil {
		return findTokenIn("detail", map[string]any(r.Detail))
	}
	return ""
}

// findTokenIn walks a decoded JSON value (keys included) in a stable order.
func findTokenIn(path string, v any) string {
	switch v := v.(type) {
	case string:
		if looksLikeJWT(v) {
			return path
		}
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if looksLikeJWT(k) {
				return path + ".<key>"
			}
			if p := findTokenIn(path+"."+k, v[k]); p != "" {
				return p
			}
		}
	case []any:
		for i, e := range v {
			if p := findTokenIn(fmt.Sprintf("%s[%d]", path, i), e); p != "" {
				return p
			}
		}
	}
	return ""
}

// LooksLikeToken reports whether s holds something shaped like a JWT, which
// Append refuses to record (ErrToken). Code that takes a value from
// a person and later audits it (an id, a comment) refuses such a value when
// it arrives, as a bad request, instead of failing at the audit.
func LooksLikeToken(s string) bool { return looksLikeJWT(s) }

// looksLikeJWT reports whether s contains a JWS or JWE compact
// serialization: a run of at least three dot-separated base64url segments of
// which one, followed by at least two more, decodes to a JSON object with an
// "alg" member (the JOSE header). Anywhere in s, so "Bearer eyJ..." is caught
// too. Requiring the decoded header keeps version numbers, host names and
// order ids (which are dotted, or base64url-shaped, but have no JSON header)
// from being mistaken for tokens.
func looksLikeJWT(s string) bool {
	if !strings.Contains(s, ".") {
		return false
	}
	isB64 := func(r rune) bool {
		return r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '='
	}
	for _, run := range strings.FieldsFunc(s, func(r rune) bool { return !isB64(r) && r != '.' }) {
		segs := strings.Split(run, ".")
		for i := 0; i+2 < len(segs); i++ {
			if joseHeader(segs[i]) {
				return true
			}
		}
	}
	return false
}

func joseHeader(seg string) bool {
	seg = strings.TrimRight(seg, "=")
	if len(seg) < 4 { // {"alg":..} is longer; cheap reject
		return false
	}
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return false
	}
	var h map[string]json.RawMessage
	if json.Unmarshal(b, &h) != nil {
		return false
	}
	_, ok := h["alg"]
	return ok
}
