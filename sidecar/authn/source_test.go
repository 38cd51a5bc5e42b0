package authn_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign/executor/simclock"
	"github.com/countersign/countersign/sidecar/authn"
	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
)

func writeJWKS(t *testing.T, path string, keys ...jwk.Key) {
	t.Helper()
	doc, err := json.Marshal(setOf(t, keys...))
	must(t, err)
	must(t, os.WriteFile(path, doc, 0o600))
}

func TestFileSourceAndRotation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "jwks.json")
	k1 := newSigner(t, jwa.EdDSA(), "file-1")
	k2 := newSigner(t, jwa.ES256(), "file-2")
	k3 := newSigner(t, jwa.EdDSA(), "file-3")
	writeJWKS(t, path, k1.pub)

	clock := simclock.New(t0)
	v := newVerifier(t, authn.Options{
		Issuers:    []authn.Issuer{{Name: corpIssuer, JWKSFile: path}},
		Clock:      clock,
		RefetchGap: 10 * time.Second,
	})
	ctx := context.Background()
	if _, err := v.Verify(ctx, k1.sign(t, claims())); err != nil {
		t.Fatalf("key from file: %v", err)
	}

	// The operator rotates by replacing the file; the first token with the
	// new kid reloads it.
	writeJWKS(t, path, k2.pub)
	if _, err := v.Verify(ctx, k2.sign(t, claims())); err != nil {
		t.Fatalf("rotated key not picked up on unknown kid: %v", err)
	}
	if _, err := v.Verify(ctx, k1.sign(t, claims())); code(err) != authn.CodeUnknownKid {
		t.Fatalf("removed key: %v, want unknown_kid", err)
	}

	// Within the gap, another unknown kid does not reload.
	writeJWKS(t, path, k2.pub, k3.pub)
	clock.Advance(5 * time.Second)
	if _, err := v.Verify(ctx, k3.sign(t, claims())); code(err) != authn.CodeUnknownKid {
		t.Fatalf("reloaded within the gap: %v", err)
	}
	clock.Advance(5 * time.Second)
	if _, err := v.Verify(ctx, k3.sign(t, claims())); err != nil {
		t.Fatalf("not reloaded after the gap: %v", err)
	}

	// A broken file keeps the keys already loaded.
	must(t, os.WriteFile(path, []byte("{"), 0o600))
	clock.Advance(time.Minute)
	if _, err := v.Verify(ctx, k1.sign(t, claims())); code(err) != authn.CodeUnknownKid {
		t.Fatalf("broken file: %v, want unknown_kid", err)
	}
	if _, err := v.Verify(ctx, k2.sign(t, claims())); err != nil {
		t.Fatalf("keys already loaded were dropped by a broken file: %v", err)
	}
}

// jwksServer serves a JWKS that the test can replace, and counts fetches.
type jwksServer struct {
	*httptest.Server
	mu      sync.Mutex
	doc     []byte
	fetches atomic.Int64
}

func newJWKSServer(t *testing.T, keys ...jwk.Key) *jwksServer {
	s := &jwksServer{}
	s.set(t, keys...)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.fetches.Add(1)
		s.mu.Lock()
		doc := s.doc
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(doc)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *jwksServer) set(t *testing.T, keys ...jwk.Key) {
	doc, err := json.Marshal(setOf(t, keys...))
	must(t, err)
	s.mu.Lock()
	s.doc = doc
	s.mu.Unlock()
}

func TestURLSourceAndRotation(t *testing.T) {
	k1 := newSigner(t, jwa.RS256(), "url-1")
	k2 := newSigner(t, jwa.EdDSA(), "url-2")
	k3 := newSigner(t, jwa.EdDSA(), "url-3")
	srv := newJWKSServer(t, k1.pub)

	clock := simclock.New(t0)
	v := newVerifier(t, authn.Options{
		Issuers:    []authn.Issuer{{Name: corpIssuer, JWKSURL: srv.URL + "/jwks.json", RefreshInterval: time.Hour}},
		Clock:      clock,
		RefetchGap: 10 * time.Second,
	})
	ctx := context.Background()
	if _, err := v.Verify(ctx, k1.sign(t, claims())); err != nil {
		t.Fatalf("key from URL: %v", err)
	}
	base := srv.fetches.Load()
	for range 3 {
		if _, err := v.Verify(ctx, k1.sign(t, claims())); err != nil {
			t.Fatal(err)
		}
	}
	if got := srv.fetches.Load(); got != base {
		t.Fatalf("known kids caused %d fetches, want none (served from the cache)", got-base)
	}

	// The issuer rotates; the first token with the new kid forces a refresh.
	srv.set(t, k2.pub)
	if _, err := v.Verify(ctx, k2.sign(t, claims())); err != nil {
		t.Fatalf("rotation not picked up on unknown kid: %v", err)
	}
	if got := srv.fetches.Load(); got != base+1 {
		t.Fatalf("%d fetches for one unknown kid, want 1", got-base)
	}
	if _, err := v.Verify(ctx, k1.sign(t, claims())); code(err) != authn.CodeUnknownKid {
		t.Fatalf("rotated-out key: %v, want unknown_kid", err)
	}

	// Made-up kids within the gap cost no fetch.
	stranger := newSigner(t, jwa.EdDSA(), "made-up")
	for range 5 {
		if _, err := v.Verify(ctx, stranger.sign(t, claims())); code(err) != authn.CodeUnknownKid {
			t.Fatalf("made-up kid: %v", err)
		}
	}
	if got := srv.fetches.Load(); got != base+1 {
		t.Fatalf("made-up kids within the gap caused %d extra fetches", got-base-1)
	}

	// After the gap, the next unknown kid refreshes again.
	srv.set(t, k2.pub, k3.pub)
	clock.Advance(10 * time.Second)
	if _, err := v.Verify(ctx, k3.sign(t, claims())); err != nil {
		t.Fatalf("not refreshed after the gap: %v", err)
	}

	// The issuer goes away: known keys keep working from the cache, and an
	// unknown kid is refused (fail closed), not an internal error.
	srv.Close()
	clock.Advance(time.Minute)
	if _, err := v.Verify(ctx, k2.sign(t, claims())); err != nil {
		t.Fatalf("cached key while the issuer is down: %v", err)
	}
	if _, err := v.Verify(ctx, stranger.sign(t, claims())); code(err) != authn.CodeUnknownKid {
		t.Fatalf("unknown kid while the issuer is down: %v", err)
	}
}

func TestURLSourceUnreachableAtStart(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL + "/jwks.json"
	srv.Close()
	_, err := authn.New(context.Background(), authn.Options{
		Issuers:      []authn.Issuer{{Name: corpIssuer, JWKSURL: url}},
		FetchTimeout: 2 * time.Second,
	})
	if err == nil {
		t.Fatal("New succeeded without the issuer's keys")
	}
}
