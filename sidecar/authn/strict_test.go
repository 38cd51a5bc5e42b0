package authn_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/sidecar/authn"
	"github.com/lestrrat-go/jwx/v3/jwa"
)

// TestAmbiguousTokensRefused: a token that two JSON readers could read
// differently is refused, signature or not: the last of two "role" members
// wins in Go and jwx, the first in other libraries, and a case variant is
// ignored by some and matched by others. Each token here is validly signed
// by the trusted key, so only the ambiguity can refuse it.
func TestAmbiguousTokensRefused(t *testing.T) {
	trusted := newSigner(t, jwa.EdDSA(), "corp-1")
	v := newVerifier(t, authn.Options{Issuers: []authn.Issuer{{Name: corpIssuer, Keys: setOf(t, trusted.pub)}}})
	hdr := []byte(`{"alg":"EdDSA","kid":"corp-1"}`)
	exp := strconv.FormatInt(t0.Add(time.Hour).Unix(), 10)

	if _, err := v.Verify(context.Background(), trusted.signBytes(t, hdr, claimsJSON(t, nil, ""))); err != nil {
		t.Fatalf("the unambiguous control token is refused: %v", err)
	}
	for _, tc := range []struct {
		name         string
		hdr, payload []byte
		want         authn.Code
		mention      string
	}{
		{"role twice in the payload", hdr, claimsJSON(t, map[string]string{"role": `"rep"`}, `"role":"lead"`), authn.CodeTokenMalformed, `"role"`},
		{"role and Role in the payload", hdr, claimsJSON(t, nil, `"Role":"operator"`), authn.CodeTokenMalformed, `"Role"`},
		{"sub and SUB in the payload", hdr, claimsJSON(t, nil, `"SUB":"ops-ida"`), authn.CodeTokenMalformed, `"SUB"`},
		{"exp twice in the payload", hdr, claimsJSON(t, nil, `"exp":`+exp), authn.CodeTokenMalformed, `"exp"`},
		{"a duplicate inside a nested claim", hdr, claimsJSON(t, nil, `"ext":{"tier":"gold","tier":"basic"}`), authn.CodeTokenMalformed, `"ext.tier"`},
		{"a case variant inside an array of objects", hdr, claimsJSON(t, nil, `"ext":[{"k":1,"K":2}]`), authn.CodeTokenMalformed, `"ext[0].K"`},
		{"kid twice in the header", []byte(`{"alg":"EdDSA","kid":"other","kid":"corp-1"}`), claimsJSON(t, nil, ""), authn.CodeTokenMalformed, `"kid"`},
		{"alg and ALG in the header", []byte(`{"alg":"EdDSA","ALG":"none","kid":"corp-1"}`), claimsJSON(t, nil, ""), authn.CodeTokenMalformed, `"ALG"`},
		{"a duplicate inside a header member", []byte(`{"alg":"EdDSA","kid":"corp-1","x":{"a":1,"a":2}}`), claimsJSON(t, nil, ""), authn.CodeTokenMalformed, `"x.a"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := v.Verify(context.Background(), trusted.signBytes(t, tc.hdr, tc.payload))
			if err == nil {
				t.Fatalf("accepted: %+v", p)
			}
			if got := code(err); got != tc.want {
				t.Fatalf("code %q, want %q (%v)", got, tc.want, err)
			}
			if msg := err.(*authn.Error).Message; !strings.Contains(msg, tc.mention) || !strings.Contains(msg, "once") {
				t.Errorf("message %q does not name %s or say to send it once", msg, tc.mention)
			}
		})
	}
}

// TestCritRefused: crit names extensions the recipient must understand or
// refuse (RFC 7515 section 4.1.11); this sidecar understands none.
func TestCritRefused(t *testing.T) {
	trusted := newSigner(t, jwa.EdDSA(), "corp-1")
	v := newVerifier(t, authn.Options{Issuers: []authn.Issuer{{Name: corpIssuer, Keys: setOf(t, trusted.pub)}}})
	for _, hdr := range []string{
		`{"alg":"EdDSA","kid":"corp-1","crit":["countersign.example/tier"],"countersign.example/tier":"gold"}`,
		`{"alg":"EdDSA","kid":"corp-1","crit":["exp"],"exp":1}`,
		`{"alg":"EdDSA","kid":"corp-1","crit":[]}`,
	} {
		t.Run(hdr, func(t *testing.T) {
			p, err := v.Verify(context.Background(), trusted.signBytes(t, []byte(hdr), claimsJSON(t, nil, "")))
			if err == nil {
				t.Fatalf("accepted: %+v", p)
			}
			if got := code(err); got != authn.CodeTokenMalformed || !strings.Contains(err.(*authn.Error).Message, "crit") {
				t.Fatalf("%v, want token_malformed naming crit", err)
			}
		})
	}
}

// TestDatesAreNumbers: exp, nbf and iat are JSON numbers (RFC 7519
// NumericDate); a string that reads as a number is refused, not honoured.
func TestDatesAreNumbers(t *testing.T) {
	trusted := newSigner(t, jwa.EdDSA(), "corp-1")
	v := newVerifier(t, authn.Options{Issuers: []authn.Issuer{{Name: corpIssuer, Keys: setOf(t, trusted.pub)}}})
	future := strconv.FormatInt(t0.Add(time.Hour).Unix(), 10)
	past := strconv.FormatInt(t0.Add(-time.Hour).Unix(), 10)
	for _, tc := range []struct {
		name     string
		replace  map[string]string
		want     authn.Code
		accepted bool
	}{
		{"exp a number", map[string]string{"exp": future}, "", true},
		{"exp a fraction", map[string]string{"exp": future + ".5"}, "", true},
		{"exp a numeric string", map[string]string{"exp": `"` + future + `"`}, authn.CodeBadClaims, false},
		{"exp a past numeric string", map[string]string{"exp": `"` + past + `"`}, authn.CodeBadClaims, false},
		{"exp null", map[string]string{"exp": `null`}, authn.CodeBadClaims, false},
		{"exp true", map[string]string{"exp": `true`}, authn.CodeBadClaims, false},
		{"iat a numeric string", map[string]string{"iat": `"` + past + `"`}, authn.CodeBadClaims, false},
		{"nbf a numeric string", map[string]string{"nbf": `"` + past + `"`}, authn.CodeBadClaims, false},
		{"nbf an array", map[string]string{"nbf": `[` + past + `]`}, authn.CodeBadClaims, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok := trusted.signBytes(t, []byte(`{"alg":"EdDSA","kid":"corp-1"}`), claimsJSON(t, tc.replace, ""))
			p, err := v.Verify(context.Background(), tok)
			if tc.accepted {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted: %+v", p)
			}
			if got := code(err); got != tc.want || !strings.Contains(err.(*authn.Error).Message, "number") {
				t.Fatalf("%v, want %s saying it must be a number", err, tc.want)
			}
		})
	}
}

// TestSubjectIsAnIdentifier: sub becomes a workflow's user, shown to
// leads and written to the audit log, so it is a short identifier without
// white space or control characters.
func TestSubjectIsAnIdentifier(t *testing.T) {
	trusted := newSigner(t, jwa.EdDSA(), "corp-1")
	v := newVerifier(t, authn.Options{Issuers: []authn.Issuer{{Name: corpIssuer, Keys: setOf(t, trusted.pub)}}})
	for _, tc := range []struct {
		sub  string
		want string // a word of the message; "" means accepted
	}{
		{"rep-ana", ""},
		{"zoë@quillfeather.example", ""},
		{strings.Repeat("a", authn.MaxSubjectBytes), ""},
		{"", "no sub"},
		{strings.Repeat("a", authn.MaxSubjectBytes+1), "longer"},
		{strings.Repeat("a", 1000), "longer"},
		{"rep\x00ana", "control"},
		{"rep-ana\n", "control"},
		{"rep-ana\r\nX-Role: operator", "control"},
		{"\x1b[31mrep-ana", "control"},
		{"rep\u0085ana", "control"},
		{"rep ana", "white space"},
		{"rep-ana\t", "control"},
		{"rep\u00a0ana", "white space"},
		{"rep\u2028ana", "white space"},
		{"rep\u202eana", "control"},
		{"rep\u200dana", "control"}, // a zero-width joiner
		// PRECIS UsernameCaseMapped (RFC 8265) refuses what no same-person
		// check could compare; the spellings it maps are kept as presented.
		{"ops-ida\u2122", "PRECIS"},
		{"rep\u2603", "PRECIS"},
		{"\u210cops", "PRECIS"},
		{"\u05d0-b", "PRECIS"},
		{"ＯＰＳ－ＩＤＡ", ""},
		{"Rep-Ana", ""},
	} {
		name := strconv.Quote(tc.sub)
		if len(tc.sub) > 20 {
			name = strconv.Itoa(len(tc.sub)) + " bytes"
		}
		t.Run(name, func(t *testing.T) {
			c := claims()
			c["sub"] = tc.sub
			p, err := v.Verify(context.Background(), trusted.sign(t, c))
			if tc.want == "" {
				if err != nil || p.ID != tc.sub {
					t.Fatalf("refused or changed: %+v, %v", p, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted: %+v", p)
			}
			if got := code(err); got != authn.CodeBadClaims || !strings.Contains(err.(*authn.Error).Message, tc.want) {
				t.Fatalf("%v, want bad_claims saying %q", err, tc.want)
			}
		})
	}
}
