package authn_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/executor/identity"
	"github.com/countersign/countersign/executor/simclock"
	"github.com/countersign/countersign/sidecar/authn"
	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
)

// FuzzVerify feeds Verify arbitrary token strings. It must never panic,
// every refusal must be an *Error matching ErrUnauthenticated, and anything
// it accepts must carry a signature that verifies, independently of Verify,
// with the one trusted public key.
//
// The seed corpus runs with every `go test`; fuzz longer with
//
//	go test ./sidecar/authn -run '^$' -fuzz FuzzVerify -fuzztime 60s
func FuzzVerify(f *testing.F) {
	trusted := newSigner(f, jwa.EdDSA(), "corp-1")
	foreign := newSigner(f, jwa.EdDSA(), "corp-1")
	var rawPub ed25519.PublicKey
	must(f, jwk.Export(trusted.pub, &rawPub))

	valid := trusted.sign(f, claims())
	parts := strings.Split(valid, ".")
	expired := claims()
	expired["exp"] = t0.Unix()
	for _, seed := range []string{
		valid,
		"Bearer " + valid,
		foreign.sign(f, claims()),
		trusted.sign(f, expired),
		handmade(map[string]any{"alg": "none", "kid": "corp-1"}, claims(), nil),
		handmade(map[string]any{"alg": "HS256", "kid": "corp-1"}, claims(), rawPub),
		handmade(map[string]any{"alg": "EdDSA", "kid": "corp-1", "crit": []string{"exp"}}, claims(), nil),
		handmade(map[string]any{"alg": "EdDSA", "kid": "corp-1", "b64": false, "crit": []string{"b64"}}, claims(), nil),
		b64([]byte(`{"alg":"EdDSA","kid":"x","kid":"corp-1"}`)) + "." + parts[1] + "." + parts[2],
		b64([]byte(`{"alg":"EdDSA","ALG":"none","kid":"corp-1"}`)) + "." + parts[1] + "." + parts[2],
		parts[0] + "." + b64([]byte(`{"role":"rep","role":"operator"}`)) + "." + parts[2],
		parts[0] + "." + b64([]byte(`{"exp":"1796000000"}`)) + "." + parts[2],
		trusted.sign(f, func() map[string]any { c := claims(); c["sub"] = "rep-ana\n"; return c }()),
		trusted.sign(f, func() map[string]any { c := claims(); c["sub"] = "rep-ana\u2122"; return c }()),
		trusted.sign(f, func() map[string]any { c := claims(); c["sub"] = "ＲＥＰ－ＡＮＡ"; return c }()),
		parts[0] + "." + parts[1] + ".",
		parts[0] + ".." + parts[2],
		"." + parts[1] + "." + parts[2],
		parts[0] + "." + b64([]byte("null")) + "." + parts[2],
		parts[0] + "." + b64([]byte(`"`+valid+`"`)) + "." + parts[2],
		"", ".", "..", "...", "a.b.c", "e30.e30.e30", "eyJhbGciOiJFZERTQSJ9.e30.AA",
		`{"payload":"e30","signatures":[{"protected":"e30","signature":""}]}`,
	} {
		f.Add(seed)
	}

	v := newVerifier(f, authn.Options{Issuers: []authn.Issuer{{Name: corpIssuer, Keys: setOf(f, trusted.pub)}}})
	f.Fuzz(func(t *testing.T, tok string) {
		p, err := v.Verify(context.Background(), tok)
		if err != nil {
			var e *authn.Error
			if !errors.As(err, &e) || !errors.Is(err, authn.ErrUnauthenticated) || e.Code == "" || e.Message == "" {
				t.Fatalf("refusal is not a coded *Error: %#v", err)
			}
			return
		}
		if _, verr := jws.Verify([]byte(tok), jws.WithKey(jwa.EdDSA(), trusted.pub)); verr != nil {
			t.Fatalf("accepted a token the trusted key did not sign: %q (%v)", tok, verr)
		}
		if p.ID == "" || p.Expires.Before(t0) {
			t.Fatalf("accepted a principal without id or already expired: %+v", p)
		}
		if _, err := identity.Canonical(p.ID); err != nil {
			t.Fatalf("accepted a sub that no same-person check can compare: %v", err)
		}
	})
}

func BenchmarkVerify(b *testing.B) {
	trusted := newSigner(b, jwa.EdDSA(), "corp-1")
	v := newVerifier(b, authn.Options{
		Issuers: []authn.Issuer{{Name: corpIssuer, Keys: setOf(b, trusted.pub)}},
		Clock:   simclock.New(t0.Add(time.Minute)),
	})
	tok := trusted.sign(b, claims())
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Verify(ctx, tok); err != nil {
			b.Fatal(err)
		}
	}
}
