// Package actorchecktest stands in for the sidecar's key publishing in tests
// of the systems of record: an [Issuer] holds one Ed25519 key per credential
// epoch, serves the current epoch's public key as a JWKS over HTTP, mints
// actor tokens with jwx directly, and forges the bad ones (alg none, HS256
// over the public key bytes, a foreign key, missing claims) that a real
// minter would never produce.
package actorchecktest

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"

	"github.com/countersign/countersign/executor/clock"
)

// Agent is the act.sub of the tokens Mint makes.
const Agent = "agent-1"

// Issuer signs actor tokens and serves its JWKS on a loopback server.
type Issuer struct {
	// Clock is the time tokens are minted at (iat; exp is iat+60s).
	// NewIssuer sets the wall clock.
	Clock clock.Clock

	srv     *httptest.Server
	fetches atomic.Int64
	jti     atomic.Int64

	mu    sync.Mutex
	epoch int
	keys  map[int]jwk.Key // private keys by epoch
}

// NewIssuer starts an issuer at epoch 1 whose JWKS server stops with t.
func NewIssuer(t testing.TB) *Issuer {
	t.Helper()
	i := &Issuer{Clock: clock.Wall{}, keys: map[int]jwk.Key{}}
	i.Rotate(t)
	i.srv = httptest.NewServer(http.HandlerFunc(i.serveJWKS))
	t.Cleanup(i.srv.Close)
	return i
}

// JWKSURL is the URL of the published key set.
func (i *Issuer) JWKSURL() string { return i.srv.URL + "/.well-known/jwks.json" }

// Fetches counts the JWKS requests served so far.
func (i *Issuer) Fetches() int { return int(i.fetches.Load()) }

// Epoch is the current credential epoch.
func (i *Issuer) Epoch() int {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.epoch
}

// Rotate raises the epoch with a fresh key; the JWKS then publishes only
// that key, as the sidecar does.
func (i *Issuer) Rotate(t testing.TB) int {
	t.Helper()
	k := NewKey(t, "")
	i.mu.Lock()
	defer i.mu.Unlock()
	i.epoch++
	if err := k.Set(jwk.KeyIDKey, fmt.Sprintf("epoch-%d", i.epoch)); err != nil {
		t.Fatal(err)
	}
	i.keys[i.epoch] = k
	return i.epoch
}

// Key returns the private key of an epoch.
func (i *Issuer) Key(epoch int) jwk.Key {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.keys[epoch]
}

// PublicSet is the JWKS of the current epoch (what the sidecar publishes).
func (i *Issuer) PublicSet(t testing.TB) jwk.Set {
	t.Helper()
	pub, err := jwk.PublicKeyOf(i.Key(i.Epoch()))
	if err != nil {
		t.Fatal(err)
	}
	set := jwk.NewSet()
	if err := set.AddKey(pub); err != nil {
		t.Fatal(err)
	}
	return set
}

// PublicKeyBytes are the raw 32 bytes of an epoch's public key (what an
// HS256 confusion attack would use as the HMAC secret).
func (i *Issuer) PublicKeyBytes(t testing.TB, epoch int) []byte {
	t.Helper()
	var priv ed25519.PrivateKey
	if err := jwk.Export(i.Key(epoch), &priv); err != nil {
		t.Fatal(err)
	}
	return priv.Public().(ed25519.PublicKey)
}

func (i *Issuer) serveJWKS(w http.ResponseWriter, r *http.Request) {
	i.fetches.Add(1)
	i.mu.Lock()
	k := i.keys[i.epoch]
	i.mu.Unlock()
	pub, err := jwk.PublicKeyOf(k)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	set := jwk.NewSet()
	_ = set.AddKey(pub)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(set)
}

// NewKey generates an Ed25519 private key in JWK form with alg EdDSA and the
// given kid (none when empty).
func NewKey(t testing.TB, kid string) jwk.Key {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k, err := jwk.Import(priv)
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]any{jwk.AlgorithmKey: jwa.EdDSA(), jwk.KeyUsageKey: "sig"} {
		if err := k.Set(name, v); err != nil {
			t.Fatal(err)
		}
	}
	if kid != "" {
		if err := k.Set(jwk.KeyIDKey, kid); err != nil {
			t.Fatal(err)
		}
	}
	return k
}

// Claims returns a valid payload for one call, as the sidecar would mint
// it at the issuer's current epoch; tests edit the map to forge bad ones.
func (i *Issuer) Claims(sub, aud, scope string, max int64, call string) map[string]any {
	now := i.Clock.Now()
	return map[string]any{
		"iss":   "countersign",
		"sub":   sub,
		"act":   map[string]any{"sub": Agent},
		"aud":   aud,
		"scope": scope,
		"max":   max,
		"call":  call,
		"jti":   fmt.Sprintf("jti-%d", i.jti.Add(1)),
		"iat":   now.Unix(),
		"exp":   now.Add(60 * time.Second).Unix(),
		"epoch": i.Epoch(),
	}
}

// Mint signs a valid token for one call with the current epoch's key.
func (i *Issuer) Mint(t testing.TB, sub, aud, scope string, max int64, call string) string {
	t.Helper()
	return i.Sign(t, i.Claims(sub, aud, scope, max, call))
}

// MintWith is Mint with more claims: "key" for a ledger write's
// Idempotency-Key, "ref" for a reshipment's reference.
func (i *Issuer) MintWith(t testing.TB, sub, aud, scope string, max int64, call string, more map[string]any) string {
	t.Helper()
	c := i.Claims(sub, aud, scope, max, call)
	for k, v := range more {
		c[k] = v
	}
	return i.Sign(t, c)
}

// Sign signs claims with the current epoch's key (kid epoch-N).
func (i *Issuer) Sign(t testing.TB, claims map[string]any) string {
	t.Helper()
	return SignWith(t, i.Key(i.Epoch()), claims)
}

// SignWith signs claims with key, EdDSA; the header carries key's kid.
func SignWith(t testing.TB, key jwk.Key, claims map[string]any) string {
	t.Helper()
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jws.Sign(payload, jws.WithKey(jwa.EdDSA(), key))
	if err != nil {
		t.Fatal(err)
	}
	return string(tok)
}

// SignHS256 forges an HMAC token with secret as the key and kid in the
// header: the algorithm-confusion attack on verifiers that take alg from
// the token.
func SignHS256(t testing.TB, secret []byte, kid string, claims map[string]any) string {
	t.Helper()
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	h := jws.NewHeaders()
	if err := h.Set(jws.KeyIDKey, kid); err != nil {
		t.Fatal(err)
	}
	tok, err := jws.Sign(payload, jws.WithKey(jwa.HS256(), secret, jws.WithProtectedHeaders(h)))
	if err != nil {
		t.Fatal(err)
	}
	return string(tok)
}

// Unsigned forges an alg "none" token with an empty signature.
func Unsigned(t testing.TB, kid string, claims map[string]any) string {
	t.Helper()
	h, err := json.Marshal(map[string]string{"alg": "none", "kid": kid})
	if err != nil {
		t.Fatal(err)
	}
	p, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding.EncodeToString
	return enc(h) + "." + enc(p) + "."
}
