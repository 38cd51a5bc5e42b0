package authn_test

import (
	"strings"
	"testing"

	"github.com/countersign/countersign/sidecar/authn"
)

func TestFromHeader(t *testing.T) {
	for _, tc := range []struct {
		in   string
		tok  string
		code authn.Code
	}{
		{"Bearer abc.def.ghi", "abc.def.ghi", ""},
		{"bearer abc.def.ghi", "abc.def.ghi", ""},
		{"BEARER abc.def.ghi", "abc.def.ghi", ""},
		{"", "", authn.CodeTokenMissing},
		{"Bearer", "", authn.CodeTokenMissing},
		{"Basic dXNlcjpwYXNz", "", authn.CodeTokenMissing},
		{"Token abc", "", authn.CodeTokenMissing},
		{"Bearerabc", "", authn.CodeTokenMissing},
		{"Bearer ", "", authn.CodeTokenMissing},
		{"Bearer  abc", "", authn.CodeTokenMalformed},
		{"Bearer abc def", "", authn.CodeTokenMalformed},
		{"Bearer abc ", "", authn.CodeTokenMalformed},
		{"Bearer abc\tdef", "", authn.CodeTokenMalformed},
	} {
		t.Run(tc.in, func(t *testing.T) {
			tok, err := authn.FromHeader(tc.in)
			if tok != tc.tok || code(err) != tc.code {
				t.Fatalf("FromHeader(%q) = %q, %v; want %q, code %q", tc.in, tok, err, tc.tok, tc.code)
			}
		})
	}
}

// TestFromHeaders: a request carries exactly one Authorization header; with
// two, a proxy and the sidecar may each pick a different one.
func TestFromHeaders(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []string
		tok  string
		code authn.Code
	}{
		{"one header", []string{"Bearer abc.def.ghi"}, "abc.def.ghi", ""},
		{"no header", nil, "", authn.CodeTokenMissing},
		{"one empty header", []string{""}, "", authn.CodeTokenMissing},
		{"one header of another scheme", []string{"Basic dXNlcjpwYXNz"}, "", authn.CodeTokenMissing},
		{"one header with two tokens", []string{"Bearer abc def"}, "", authn.CodeTokenMalformed},
		{"two bearer headers", []string{"Bearer abc.def.ghi", "Bearer jkl.mno.pqr"}, "", authn.CodeTokenMalformed},
		{"the same header twice", []string{"Bearer abc.def.ghi", "Bearer abc.def.ghi"}, "", authn.CodeTokenMalformed},
		{"a bearer header and an empty one", []string{"Bearer abc.def.ghi", ""}, "", authn.CodeTokenMalformed},
		{"a basic header and a bearer header", []string{"Basic dXNlcjpwYXNz", "Bearer abc.def.ghi"}, "", authn.CodeTokenMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok, err := authn.FromHeaders(tc.in)
			if tok != tc.tok || code(err) != tc.code {
				t.Fatalf("FromHeaders(%q) = %q, %v; want %q, code %q", tc.in, tok, err, tc.tok, tc.code)
			}
			if tc.code == authn.CodeTokenMalformed && len(tc.in) > 1 && !strings.Contains(err.(*authn.Error).Message, "exactly one") {
				t.Errorf("message %q does not say to send exactly one header", err.(*authn.Error).Message)
			}
		})
	}
}
