package authn_test

import (
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
