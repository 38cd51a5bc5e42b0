package idp_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/executor/fixture"
	"github.com/countersign/countersign/executor/sim/idp"
	"github.com/countersign/countersign/executor/simclock"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jwt"
)

var t0 = time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)

func open(t *testing.T, dir string) *idp.Issuer {
	t.Helper()
	iss, err := idp.Open(idp.Options{Dir: dir, Clock: simclock.New(t0)})
	if err != nil {
		t.Fatal(err)
	}
	return iss
}

func payload(t *testing.T, tok string) map[string]any {
	t.Helper()
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("%d parts", len(parts))
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestTokensForEveryFixturePerson(t *testing.T) {
	iss := open(t, t.TempDir())
	toks, err := iss.Tokens(fixture.People(), idp.DevTokenTTL)
	if err != nil {
		t.Fatal(err)
	}
	if len(toks) != len(fixture.People()) {
		t.Fatalf("%d tokens, want %d", len(toks), len(fixture.People()))
	}
	set := iss.JWKS()
	for _, p := range fixture.People() {
		t.Run(p.ID, func(t *testing.T) {
			tok := toks[p.ID]
			_, err := jwt.ParseString(tok, jwt.WithKeySet(set),
				jwt.WithClock(jwt.ClockFunc(func() time.Time { return t0.Add(23 * time.Hour) })),
				jwt.WithIssuer(idp.DefaultIssuer), jwt.WithAudience("countersign"))
			if err != nil {
				t.Fatalf("does not verify: %v", err)
			}
			c := payload(t, tok)
			if c["sub"] != p.ID || c["role"] != p.Role || c["iss"] != "countersign-dev-idp" || c["aud"] != "countersign" {
				t.Errorf("claims %v", c)
			}
			if got := c["exp"].(json.Number).String(); got != "1793700000" {
				t.Errorf("exp %s, want 24h after iat", got)
			}
			if p.RefundCeiling != 0 {
				if n, ok := c["refund_ceiling"].(json.Number); !ok || n.String() != jsonInt(int64(p.RefundCeiling)) {
					t.Errorf("refund_ceiling %#v, want integer %d", c["refund_ceiling"], p.RefundCeiling)
				}
			}
			if p.ApproveLimit != 0 {
				if n, ok := c["approve_limit"].(json.Number); !ok || n.String() != jsonInt(int64(p.ApproveLimit)) {
					t.Errorf("approve_limit %#v, want integer %d", c["approve_limit"], p.ApproveLimit)
				}
			}
			if _, ok := c["scopes"].([]any); !ok {
				t.Errorf("scopes %#v, want an array", c["scopes"])
			}
			if jti, _ := c["jti"].(string); jti == "" {
				t.Error("no jti")
			}
		})
	}
}

func jsonInt(n int64) string { b, _ := json.Marshal(n); return string(b) }

func TestKeyPersistsWithTightPermissions(t *testing.T) {
	dir := t.TempDir()
	a := open(t, dir)
	tok, err := a.Sign(fixture.People()[0], time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]os.FileMode{
		filepath.Join(dir, "idp"):             0o700,
		filepath.Join(dir, "idp", "key.json"): 0o600,
	} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s mode %v, want %v", path, fi.Mode().Perm(), want)
		}
	}
	b := open(t, dir)
	if _, err := jwt.ParseString(tok, jwt.WithKeySet(b.JWKS()), jwt.WithClock(jwt.ClockFunc(func() time.Time { return t0 }))); err != nil {
		t.Fatalf("token from before a restart does not verify: %v", err)
	}
	k, _ := b.JWKS().Key(0)
	if kid, _ := k.KeyID(); kid != idp.KeyID {
		t.Errorf("kid %q, want %q", kid, idp.KeyID)
	}
	if ok, _ := jwk.IsPrivateKey(k); ok {
		t.Error("JWKS carries the private key")
	}
}

func TestOpenRefusesCorruptKey(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "idp"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "idp", "key.json"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := idp.Open(idp.Options{Dir: dir}); !errors.Is(err, idp.ErrKeyStore) {
		t.Fatalf("Open = %v, want ErrKeyStore", err)
	}
	if _, err := idp.Open(idp.Options{}); !errors.Is(err, idp.ErrInvalidOptions) {
		t.Fatalf("Open without Dir = %v, want ErrInvalidOptions", err)
	}
}

func TestSignRefuses(t *testing.T) {
	iss := open(t, t.TempDir())
	for name, tc := range map[string]struct {
		p   fixture.Person
		ttl time.Duration
	}{
		"no id":    {fixture.Person{Role: "rep"}, time.Hour},
		"zero ttl": {fixture.People()[0], 0},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := iss.Sign(tc.p, tc.ttl); !errors.Is(err, idp.ErrInvalidPerson) {
				t.Fatalf("Sign = %v, want ErrInvalidPerson", err)
			}
		})
	}
}

func TestCustomIssuerName(t *testing.T) {
	iss, err := idp.Open(idp.Options{Dir: t.TempDir(), Issuer: "https://idp.example"})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := iss.Sign(fixture.People()[0], time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if got := payload(t, tok)["iss"]; got != "https://idp.example" || iss.Name() != "https://idp.example" {
		t.Errorf("iss %v, Name %q", got, iss.Name())
	}
}

func TestJWKSHandler(t *testing.T) {
	iss := open(t, t.TempDir())
	srv := httptest.NewServer(iss.JWKSHandler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	set, err := jwk.ParseReader(resp.Body)
	if err != nil || set.Len() != 1 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("JWKS over HTTP: %v, %d keys, %q", err, set.Len(), resp.Header.Get("Content-Type"))
	}
	if !bytes.Equal(iss.JWKSJSON(), mustMarshal(t, set)) {
		t.Error("served JWKS differs from JWKSJSON")
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
