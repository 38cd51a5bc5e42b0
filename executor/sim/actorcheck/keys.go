package actorcheck

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
)

// maxJWKSBytes bounds what a JWKS fetch reads; the sidecar's set is one key.
const maxJWKSBytes = 1 << 20

// keyring is one fetched JWKS reduced to what verification needs.
type keyring struct {
	keys    map[string]ed25519.PublicKey // kid "epoch-N" -> key
	current int                          // the highest N in the set
	started time.Time                    // when the fetch that produced it began
}

// epochOf parses a kid of the form "epoch-N" (N >= 1, no sign, no leading
// zero) and returns N.
func epochOf(kid string) (int, bool) {
	s, ok := strings.CutPrefix(kid, "epoch-")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || strconv.Itoa(n) != s {
		return 0, false
	}
	return n, true
}

// newKeyring keeps the Ed25519 keys of set whose kid names an epoch. Other
// keys are ignored: an actor token is always signed by an epoch key.
func newKeyring(set jwk.Set) (*keyring, error) {
	r := &keyring{keys: map[string]ed25519.PublicKey{}}
	for i := range set.Len() {
		k, _ := set.Key(i)
		kid, ok := k.KeyID()
		if !ok {
			continue
		}
		n, ok := epochOf(kid)
		if !ok {
			continue
		}
		if alg, ok := k.Algorithm(); ok && alg.String() != jwa.EdDSA().String() {
			continue
		}
		var pub ed25519.PublicKey
		if err := jwk.Export(k, &pub); err != nil {
			continue // not an Ed25519 public key
		}
		r.keys[kid] = pub
		r.current = max(r.current, n)
	}
	if len(r.keys) == 0 {
		return nil, errors.New("the JWKS holds no Ed25519 key with a kid epoch-N")
	}
	return r, nil
}

// download fetches and parses the JWKS.
func (v *Verifier) download(ctx context.Context) (*keyring, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, v.o.JWKSURL, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := v.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: status %d", v.o.JWKSURL, resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", v.o.JWKSURL, err)
	}
	if len(body) > maxJWKSBytes {
		return nil, fmt.Errorf("GET %s: JWKS larger than %d bytes", v.o.JWKSURL, maxJWKSBytes)
	}
	set, err := jwk.Parse(body)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", v.o.JWKSURL, err)
	}
	return newKeyring(set)
}

// keys returns a keyring fresh enough for a request that arrived at arrival:
// fetched within MaxAge, or (MaxAge 0) fetched after the request arrived.
func (v *Verifier) keys(ctx context.Context, arrival time.Time) (*keyring, error) {
	if v.static != nil {
		return v.static, nil
	}
	fresh := func(r *keyring) bool {
		return !r.started.Before(arrival) || (v.o.MaxAge > 0 && time.Since(r.started) < v.o.MaxAge)
	}
	if r := v.cached(); r != nil && fresh(r) {
		return r, nil
	}
	return v.fetch(ctx, fresh)
}

// refreshFor re-fetches the JWKS because a token names a kid the cached set
// lacks. After a refresh that did not produce the kid, further such
// refreshes wait MinRefreshInterval; in between, unknown kids are refused
// from the cache.
func (v *Verifier) refreshFor(ctx context.Context, kid string, seen *keyring) (*keyring, error) {
	if v.static != nil {
		return seen, nil
	}
	v.mu.Lock()
	limited := !v.lastMiss.IsZero() && time.Since(v.lastMiss) < v.o.MinRefreshInterval
	v.mu.Unlock()
	if limited {
		return seen, nil
	}
	r, err := v.fetch(ctx, func(r *keyring) bool { return r.started.After(seen.started) })
	if err != nil {
		return nil, err
	}
	if _, ok := r.keys[kid]; !ok {
		v.mu.Lock()
		v.lastMiss = time.Now()
		v.mu.Unlock()
	}
	return r, nil
}

func (v *Verifier) cached() *keyring {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.ring
}

// fetch downloads the JWKS unless, once it holds the fetch slot, the cached
// ring already satisfies good (another request fetched meanwhile). One fetch
// runs at a time; waiting for the slot honours ctx.
func (v *Verifier) fetch(ctx context.Context, good func(*keyring) bool) (*keyring, error) {
	select {
	case v.fetching <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %w", ErrKeysUnavailable, ctx.Err())
	}
	defer func() { <-v.fetching }()
	if r := v.cached(); r != nil && good(r) {
		return r, nil
	}
	started := time.Now()
	r, err := v.download(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKeysUnavailable, err)
	}
	r.started = started
	v.mu.Lock()
	v.ring = r
	v.mu.Unlock()
	return r, nil
}
