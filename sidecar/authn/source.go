package authn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"

	"github.com/countersign/countersign/executor/clock"
)

// keySource is where one issuer's public keys come from.
type keySource interface {
	// current returns the keys as last loaded; it must be cheap.
	current(ctx context.Context) (jwk.Set, error)
	// reload fetches the keys anew (the issuer may have rotated).
	reload(ctx context.Context) (jwk.Set, error)
	// describe names the source for messages and logs.
	describe() string
}

// trustedIssuer couples an iss value with its keys and rate-limits the
// refreshes that unknown kids force, so a flood of tokens with made-up kids
// cannot turn into a flood of fetches.
type trustedIssuer struct {
	name  string
	src   keySource
	clock clock.Clock
	gap   time.Duration
	log   *slog.Logger

	mu         sync.Mutex // serializes forced refreshes
	lastForced time.Time
}

// key returns the issuer's key for kid, refreshing the source once (at most
// once per gap) when kid is unknown.
func (ti *trustedIssuer) key(ctx context.Context, kid string) (jwk.Key, error) {
	if k, ok := ti.lookup(ctx, kid); ok {
		return k, nil
	}
	ti.mu.Lock()
	defer ti.mu.Unlock()
	// Another request may have refreshed while this one waited.
	if k, ok := ti.lookup(ctx, kid); ok {
		return k, nil
	}
	now := ti.clock.Now()
	if !ti.lastForced.IsZero() && now.Sub(ti.lastForced) < ti.gap {
		return nil, ti.unknown(kid, nil)
	}
	ti.lastForced = now
	set, err := ti.src.reload(ctx)
	if err != nil {
		ti.log.Warn("could not refresh the issuer's keys", "issuer", ti.name, "source", ti.src.describe(), "err", err)
		return nil, ti.unknown(kid, err)
	}
	ti.log.Info("refreshed the issuer's keys on an unknown kid", "issuer", ti.name, "source", ti.src.describe(), "keys", set.Len())
	if k, ok := set.LookupKeyID(kid); ok {
		return k, nil
	}
	return nil, ti.unknown(kid, nil)
}

func (ti *trustedIssuer) lookup(ctx context.Context, kid string) (jwk.Key, bool) {
	set, err := ti.src.current(ctx)
	if err != nil {
		return nil, false
	}
	return set.LookupKeyID(kid)
}

func (ti *trustedIssuer) unknown(kid string, cause error) *Error {
	return refuse(CodeUnknownKid, fmt.Sprintf(
		"issuer %s has no key %s: get a new token; if the issuer just rotated its keys, retry in a few seconds",
		quote(ti.name), quote(kid)), cause)
}

// staticSource is an in-memory set (dev mode hands over the dev issuer's).
type staticSource struct{ set jwk.Set }

func (s staticSource) current(context.Context) (jwk.Set, error) { return s.set, nil }
func (s staticSource) reload(context.Context) (jwk.Set, error)  { return s.set, nil }
func (s staticSource) describe() string                         { return "in-memory key set" }

// fileSource reads a JWKS document from a file, and again on reload, so an
// operator can rotate by replacing the file.
type fileSource struct {
	path string
	set  atomic.Pointer[jwk.Set]
}

func newFileSource(path string) (*fileSource, error) {
	fs := &fileSource{path: path}
	if _, err := fs.reload(context.Background()); err != nil {
		return nil, err
	}
	return fs, nil
}

func (fs *fileSource) current(context.Context) (jwk.Set, error) { return *fs.set.Load(), nil }
func (fs *fileSource) describe() string                         { return "file " + fs.path }

func (fs *fileSource) reload(context.Context) (jwk.Set, error) {
	data, err := os.ReadFile(fs.path)
	if err != nil {
		return nil, fmt.Errorf("read JWKS: %w", err)
	}
	set, err := jwk.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("parse JWKS %s: %w", fs.path, err)
	}
	if err := checkSet(set); err != nil {
		return nil, fmt.Errorf("JWKS %s: %w", fs.path, err)
	}
	fs.set.Store(&set)
	return set, nil
}

// urlSource is a JWKS URL kept by jwx's jwk.Cache, which refreshes it in the
// background; reload forces a fetch.
type urlSource struct {
	cache   *jwk.Cache
	url     string
	timeout time.Duration
}

func (us *urlSource) current(ctx context.Context) (jwk.Set, error) {
	return us.cache.Lookup(ctx, us.url)
}
func (us *urlSource) describe() string { return "URL " + us.url }

func (us *urlSource) reload(ctx context.Context) (jwk.Set, error) {
	ctx, cancel := context.WithTimeout(ctx, us.timeout)
	defer cancel()
	return us.cache.Refresh(ctx, us.url)
}

// checkSet refuses key sets that cannot be trusted for people's tokens:
// an empty set (no token could ever verify, so the sidecar would refuse
// every person while looking healthy), keys without kid (a token could not
// name them), symmetric keys (a shared secret is not an issuer's public
// key) and private keys (whoever reads this file could sign people's
// tokens; the sidecar needs only the public half).
func checkSet(set jwk.Set) error {
	if set.Len() == 0 {
		return errors.New("holds no keys: put the identity provider's public signing keys in it (its jwks_uri document)")
	}
	var errs []error
	for i := range set.Len() {
		k, _ := set.Key(i)
		kid, _ := k.KeyID()
		if kid == "" {
			errs = append(errs, fmt.Errorf("key #%d has no kid", i+1))
		}
		if k.KeyType() == jwa.OctetSeq() {
			errs = append(errs, fmt.Errorf("key %q is symmetric (kty oct); only EdDSA, ES256 and RS256 public keys can be trusted", kid))
		}
		if private, err := jwk.IsPrivateKey(k); err == nil && private {
			errs = append(errs, fmt.Errorf("key %q is a private key: keep it at the identity provider and give the sidecar only its public half (the key without \"d\" and the other private members)", kid))
		}
	}
	return errors.Join(errs...)
}
