package authn_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/executor/credential"
	"github.com/countersign/countersign/executor/fixture"
	"github.com/countersign/countersign/executor/sim/idp"
	"github.com/countersign/countersign/executor/simclock"
	"github.com/countersign/countersign/executor/tool"
	"github.com/countersign/countersign/sidecar/authn"
	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
)

// TestVerifyRefusals: every way a token must be refused, each with its own
// code, and each a match for ErrUnauthenticated.
func TestVerifyRefusals(t *testing.T) {
	trusted := newSigner(t, jwa.EdDSA(), "corp-1")
	foreign := newSigner(t, jwa.EdDSA(), "corp-1") // same kid, other key
	stranger := newSigner(t, jwa.EdDSA(), "elsewhere-9")
	v := newVerifier(t, authn.Options{Issuers: []authn.Issuer{{Name: corpIssuer, Keys: setOf(t, trusted.pub)}}})

	var rawPub ed25519.PublicKey
	must(t, jwk.Export(trusted.pub, &rawPub))

	with := func(k string, val any) map[string]any { c := claims(); c[k] = val; return c }
	without := func(k string) map[string]any { c := claims(); delete(c, k); return c }

	authority, err := credential.Open(credential.Options{Dir: t.TempDir(), Clock: simclock.New(t0)})
	must(t, err)
	actorTok, err := authority.Mint(context.Background(), credential.Claims{
		Subject: "rep-ana", Agent: "agent-7", Audience: "ledger", Scope: "refund", Max: 50000,
		Call: tool.CallHash(tool.IssueRefund, tool.Args{Order: "O-1001", Amount: 3000}),
	})
	must(t, err)

	for _, tc := range []struct {
		name  string
		token string
		want  authn.Code
	}{
		{"empty", "", authn.CodeTokenMissing},
		{"not a JWS", "not-a-token", authn.CodeTokenMalformed},
		{"garbage segments", "a.b.c", authn.CodeTokenMalformed},
		{"four segments", trusted.sign(t, claims()) + ".x", authn.CodeTokenMalformed},
		{"JSON serialization", `{"payload":"e30","signatures":[]}`, authn.CodeTokenMalformed},
		{"payload not an object", trusted.signRaw(t, []byte(`["rep-ana"]`)), authn.CodeTokenMalformed},
		{"oversized", strings.Repeat("a", authn.MaxTokenBytes+1), authn.CodeTokenMalformed},
		{"alg none", handmade(map[string]any{"alg": "none", "kid": "corp-1"}, claims(), nil), authn.CodeAlgNotAllowed},
		{"alg None", handmade(map[string]any{"alg": "None", "kid": "corp-1"}, claims(), nil), authn.CodeAlgNotAllowed},
		{"HS256 keyed with the public key bytes", handmade(map[string]any{"alg": "HS256", "kid": "corp-1"}, claims(), rawPub), authn.CodeAlgNotAllowed},
		{"HS256 keyed with the JWK JSON", handmade(map[string]any{"alg": "HS256", "kid": "corp-1"}, claims(), []byte(b64(trusted.pub))), authn.CodeAlgNotAllowed},
		{"ES384", handmade(map[string]any{"alg": "ES384", "kid": "corp-1"}, claims(), nil), authn.CodeAlgNotAllowed},
		{"wrong issuer", trusted.sign(t, with("iss", "https://evil.example")), authn.CodeWrongIssuer},
		{"no issuer", trusted.sign(t, without("iss")), authn.CodeWrongIssuer},
		{"actor token from the credential authority", actorTok, authn.CodeWrongIssuer},
		{"unknown kid", stranger.sign(t, claims()), authn.CodeUnknownKid},
		{"no kid", handmade(map[string]any{"alg": "EdDSA"}, claims(), nil), authn.CodeUnknownKid},
		{"foreign key under a trusted kid", foreign.sign(t, claims()), authn.CodeBadSignature},
		{"payload altered after signing", alterPayload(trusted.sign(t, claims()), with("refund_ceiling", 9999999)), authn.CodeBadSignature},
		{"RS256 header on an Ed25519 key", handmade(map[string]any{"alg": "RS256", "kid": "corp-1"}, claims(), nil), authn.CodeBadSignature},
		{"exp missing", trusted.sign(t, without("exp")), authn.CodeExpMissing},
		{"expired", trusted.sign(t, with("exp", t0.Add(time.Minute).Unix())), authn.CodeTokenExpired},
		{"long expired", trusted.sign(t, with("exp", t0.Add(-time.Hour).Unix())), authn.CodeTokenExpired},
		{"issued in the future", trusted.sign(t, with("iat", t0.Add(time.Hour).Unix())), authn.CodeNotYetValid},
		{"not before in the future", trusted.sign(t, with("nbf", t0.Add(time.Hour).Unix())), authn.CodeNotYetValid},
		{"wrong audience", trusted.sign(t, with("aud", "ledger")), authn.CodeWrongAudience},
		{"audience list without countersign", trusted.sign(t, with("aud", []string{"ledger", "orders"})), authn.CodeWrongAudience},
		{"no audience", trusted.sign(t, without("aud")), authn.CodeWrongAudience},
		{"role outside rep|lead|operator", trusted.sign(t, with("role", "admin")), authn.CodeBadClaims},
		{"role missing", trusted.sign(t, without("role")), authn.CodeBadClaims},
		{"sub missing", trusted.sign(t, without("sub")), authn.CodeBadClaims},
		{"sub a number", trusted.sign(t, with("sub", 7)), authn.CodeBadClaims},
		{"refund_ceiling a fraction", trusted.sign(t, with("refund_ceiling", 500.5)), authn.CodeBadClaims},
		{"refund_ceiling a float literal", trusted.signRaw(t, []byte(`{"iss":"`+corpIssuer+`","sub":"rep-ana","aud":"countersign","role":"rep","refund_ceiling":50000.0,"exp":`+itoa(t0.Add(time.Hour).Unix())+`}`)), authn.CodeBadClaims},
		{"refund_ceiling in exponent form", trusted.signRaw(t, []byte(`{"iss":"`+corpIssuer+`","sub":"rep-ana","aud":"countersign","role":"rep","refund_ceiling":5e4,"exp":`+itoa(t0.Add(time.Hour).Unix())+`}`)), authn.CodeBadClaims},
		{"refund_ceiling a string", trusted.sign(t, with("refund_ceiling", "50000")), authn.CodeBadClaims},
		{"refund_ceiling negative", trusted.sign(t, with("refund_ceiling", -1)), authn.CodeBadClaims},
		{"approve_limit a string", trusted.sign(t, with("approve_limit", "$500")), authn.CodeBadClaims},
		{"scopes a string", trusted.sign(t, with("scopes", "refund")), authn.CodeBadClaims},
		{"scopes with a number", trusted.sign(t, with("scopes", []any{"refund", 1})), authn.CodeBadClaims},
		{"role only under another case", trusted.sign(t, func() map[string]any { c := without("role"); c["ROLE"] = "operator"; return c }()), authn.CodeBadClaims},
		{"refund_ceiling too large for int64", trusted.signRaw(t, []byte(`{"iss":"`+corpIssuer+`","sub":"rep-ana","aud":"countersign","role":"rep","refund_ceiling":99999999999999999999,"exp":`+itoa(t0.Add(time.Hour).Unix())+`}`)), authn.CodeBadClaims},
		{"exp a word", trusted.sign(t, with("exp", "tomorrow")), authn.CodeBadClaims},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := v.Verify(context.Background(), tc.token)
			if err == nil {
				t.Fatalf("accepted: %+v", p)
			}
			if got := code(err); got != tc.want {
				t.Fatalf("code %q, want %q (%v)", got, tc.want, err)
			}
			if !errors.Is(err, authn.ErrUnauthenticated) {
				t.Errorf("%v does not match ErrUnauthenticated", err)
			}
			var e *authn.Error
			if !errors.As(err, &e) || e.Message == "" || e.Status() != 401 {
				t.Errorf("want an *Error with a message and status 401, got %#v", err)
			}
			if tc.token != "" && len(tc.token) > 20 && strings.Contains(e.Message, tc.token) {
				t.Error("the message echoes the token")
			}
		})
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// alterPayload swaps the payload of a signed token for other claims,
// keeping header and signature.
func alterPayload(tok string, c map[string]any) string {
	parts := strings.Split(tok, ".")
	return parts[0] + "." + b64(c) + "." + parts[2]
}

// TestClaimNamesAreExact: a claim spelled in another case is not the
// claim. Alone it is ignored; beside the claim it makes the token
// ambiguous (a case-insensitive reader may take either), so the token is
// refused rather than read one way here and another elsewhere.
func TestClaimNamesAreExact(t *testing.T) {
	trusted := newSigner(t, jwa.EdDSA(), "corp-1")
	v := newVerifier(t, authn.Options{Issuers: []authn.Issuer{{Name: corpIssuer, Keys: setOf(t, trusted.pub)}}})
	c := claims()
	c["Refund_Ceiling"], c["SUB"] = 99999999, "ops-ida"
	p, err := v.Verify(context.Background(), trusted.sign(t, c))
	if code(err) != authn.CodeTokenMalformed {
		t.Fatalf("case variants beside the claims: %+v, %v; want token_malformed", p, err)
	}
	c = claims()
	c["Approve_Limit"] = 99999999 // claims() has no approve_limit
	p, err = v.Verify(context.Background(), trusted.sign(t, c))
	if err != nil {
		t.Fatal(err)
	}
	if p.ApproveLimit != 0 {
		t.Errorf("a case-variant claim without its original leaked into the principal: %+v", p)
	}
}

func TestLeeway(t *testing.T) {
	trusted := newSigner(t, jwa.EdDSA(), "corp-1")
	now := t0.Add(time.Hour) // exactly exp of claims()
	tok := trusted.sign(t, claims())
	for _, tc := range []struct {
		leeway time.Duration
		want   authn.Code
	}{
		{0, authn.CodeTokenExpired},
		{30 * time.Second, ""},
	} {
		v := newVerifier(t, authn.Options{
			Issuers: []authn.Issuer{{Name: corpIssuer, Keys: setOf(t, trusted.pub)}},
			Clock:   simclock.New(now),
			Leeway:  tc.leeway,
		})
		_, err := v.Verify(context.Background(), tok)
		if code(err) != tc.want {
			t.Errorf("leeway %s at exp: %v, want code %q", tc.leeway, err, tc.want)
		}
	}
}

// TestFixturePeopleAccepted: the dev issuer's token of each fixture person
// yields exactly that person.
func TestFixturePeopleAccepted(t *testing.T) {
	iss, err := idp.Open(idp.Options{Dir: t.TempDir(), Clock: simclock.New(t0)})
	must(t, err)
	v := newVerifier(t, authn.Options{Issuers: []authn.Issuer{{Name: iss.Name(), Keys: iss.JWKS()}}})
	toks, err := iss.Tokens(fixture.People(), idp.DevTokenTTL)
	must(t, err)
	roles := map[string]bool{}
	for _, want := range fixture.People() {
		t.Run(want.ID, func(t *testing.T) {
			p, err := v.Verify(context.Background(), toks[want.ID])
			if err != nil {
				t.Fatal(err)
			}
			if p.ID != want.ID || p.Role != want.Role || p.Region != want.Region ||
				p.RefundCeiling != want.RefundCeiling || p.ApproveLimit != want.ApproveLimit ||
				strings.Join(p.Scopes, ",") != strings.Join(want.Scopes, ",") {
				t.Errorf("principal %+v, want %+v", p, want)
			}
			if p.Issuer != idp.DefaultIssuer || !p.Expires.Equal(t0.Add(idp.DevTokenTTL)) {
				t.Errorf("issuer %q expires %s", p.Issuer, p.Expires)
			}
			roles[p.Role] = true
		})
	}
	if len(roles) != 3 {
		t.Errorf("roles covered %v, want rep, lead and operator", roles)
	}
	if p, _ := v.Verify(context.Background(), toks["rep-ana"]); !slices.Contains(p.Scopes, "refund") || slices.Contains(p.Scopes, "approve") {
		t.Errorf("HasScope on %v", p.Scopes)
	}
}

// TestAsymmetricAlgorithms: ES256 and RS256 tokens from a configured
// issuer are accepted, next to EdDSA, and a key is only used with its alg.
func TestAsymmetricAlgorithms(t *testing.T) {
	ed := newSigner(t, jwa.EdDSA(), "ed")
	ec := newSigner(t, jwa.ES256(), "ec")
	rs := newSigner(t, jwa.RS256(), "rs")
	v := newVerifier(t, authn.Options{Issuers: []authn.Issuer{{Name: corpIssuer, Keys: setOf(t, ed.pub, ec.pub, rs.pub)}}})
	for _, s := range []signer{ed, ec, rs} {
		t.Run(s.alg.String(), func(t *testing.T) {
			p, err := v.Verify(context.Background(), s.sign(t, claims()))
			if err != nil {
				t.Fatal(err)
			}
			if p.ID != "rep-ana" || p.RefundCeiling != 50000 {
				t.Errorf("principal %+v", p)
			}
		})
	}
	// An ES256 signature presented under the RSA key's kid.
	cross := ec.sign(t, claims())
	parts := strings.Split(cross, ".")
	hdr := b64(map[string]any{"alg": "ES256", "kid": "rs"})
	if _, err := v.Verify(context.Background(), hdr+"."+parts[1]+"."+parts[2]); code(err) != authn.CodeBadSignature {
		t.Errorf("ES256 under an RSA kid: %v, want bad_signature", err)
	}
}

func TestSeveralIssuers(t *testing.T) {
	a := newSigner(t, jwa.EdDSA(), "same-kid")
	b := newSigner(t, jwa.EdDSA(), "same-kid")
	v := newVerifier(t, authn.Options{Issuers: []authn.Issuer{
		{Name: "https://a.example", Keys: setOf(t, a.pub)},
		{Name: "https://b.example", Keys: setOf(t, b.pub)},
	}})
	ca, cb := claims(), claims()
	ca["iss"], cb["iss"] = "https://a.example", "https://b.example"
	for _, tok := range []string{a.sign(t, ca), b.sign(t, cb)} {
		if _, err := v.Verify(context.Background(), tok); err != nil {
			t.Errorf("accepted issuer refused: %v", err)
		}
	}
	// Issuer a's key cannot vouch for a token claiming to be from b.
	if _, err := v.Verify(context.Background(), a.sign(t, cb)); code(err) != authn.CodeBadSignature {
		t.Errorf("a's key for b's iss: %v, want bad_signature", err)
	}
}

func TestCancelledContextIsNotARefusal(t *testing.T) {
	trusted := newSigner(t, jwa.EdDSA(), "corp-1")
	v := newVerifier(t, authn.Options{Issuers: []authn.Issuer{{Name: corpIssuer, Keys: setOf(t, trusted.pub)}}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := v.Verify(ctx, trusted.sign(t, claims()))
	if !errors.Is(err, context.Canceled) || errors.Is(err, authn.ErrUnauthenticated) {
		t.Fatalf("err = %v, want context.Canceled and not a refusal", err)
	}
}

func TestOptionsValidation(t *testing.T) {
	key := newSigner(t, jwa.EdDSA(), "k")
	oct, err := jwk.Import([]byte("a shared secret of thirty-two b."))
	must(t, err)
	must(t, oct.Set(jwk.KeyIDKey, "hmac"))
	for _, tc := range []struct {
		name string
		opts authn.Options
		want []string // every problem is reported at once
	}{
		{"no issuers", authn.Options{}, []string{"no trusted issuer"}},
		{"two sources and no name", authn.Options{Issuers: []authn.Issuer{{JWKSFile: "/x", Keys: setOf(t, key.pub)}}, Leeway: time.Hour},
			[]string{"Name", "exactly one", "Leeway"}},
		{"no source", authn.Options{Issuers: []authn.Issuer{{Name: "a"}}}, []string{"exactly one"}},
		{"duplicate", authn.Options{Issuers: []authn.Issuer{{Name: "a", Keys: setOf(t, key.pub)}, {Name: "a", Keys: setOf(t, key.pub)}}}, []string{"twice"}},
		{"relative URL", authn.Options{Issuers: []authn.Issuer{{Name: "a", JWKSURL: "/jwks.json"}}}, []string{"absolute"}},
		{"symmetric key", authn.Options{Issuers: []authn.Issuer{{Name: "a", Keys: setOf(t, oct)}}}, []string{"symmetric"}},
		{"no keys", authn.Options{Issuers: []authn.Issuer{{Name: "a", Keys: setOf(t)}}}, []string{"holds no keys", "public signing keys"}},
		{"private key", authn.Options{Issuers: []authn.Issuer{{Name: "a", Keys: setOf(t, key.priv)}}}, []string{`key "k" is a private key`, "public half"}},
		{"missing file", authn.Options{Issuers: []authn.Issuer{{Name: "a", JWKSFile: "/nonexistent/jwks.json"}}}, []string{"no such file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := authn.New(context.Background(), tc.opts)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// TestRememberedTokenStillExpires: a token verified once is remembered,
// but never past its exp: the same string at exp is refused as expired,
// and a time before the first verification verifies it afresh.
func TestRememberedTokenStillExpires(t *testing.T) {
	trusted := newSigner(t, jwa.EdDSA(), "corp-1")
	clk := simclock.New(t0.Add(59 * time.Minute)) // claims() expire at t0+1h
	v := newVerifier(t, authn.Options{
		Issuers: []authn.Issuer{{Name: corpIssuer, Keys: setOf(t, trusted.pub)}},
		Clock:   clk,
	})
	tok := trusted.sign(t, claims())
	for i := range 2 {
		if _, err := v.Verify(context.Background(), tok); err != nil {
			t.Fatalf("verify #%d before exp: %v", i+1, err)
		}
	}
	c := claims()
	c["sub"] = "rep-eve"
	if _, err := v.Verify(context.Background(), alterPayload(tok, c)); code(err) != authn.CodeBadSignature {
		t.Fatalf("an altered copy: %v, want %s", err, authn.CodeBadSignature)
	}
	clk.Advance(time.Minute)
	if _, err := v.Verify(context.Background(), tok); code(err) != authn.CodeTokenExpired {
		t.Fatalf("the remembered token at exp: %v, want %s", err, authn.CodeTokenExpired)
	}
}
