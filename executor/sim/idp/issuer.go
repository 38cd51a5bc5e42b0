package idp

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/countersign/countersign/executor/clock"
	"github.com/countersign/countersign/executor/fixture"
	"github.com/countersign/countersign/executor/money"
	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
)

// Defaults.
const (
	// DefaultIssuer is the iss claim when Options.Issuer is empty.
	DefaultIssuer = "countersign-dev-idp"
	// Audience is the aud claim of every token: the sidecar.
	Audience = "countersign"
	// KeyID is the kid of the issuer's key.
	KeyID = "idp-1"
	// DevTokenTTL is the lifetime of the tokens written to dev-tokens.json.
	DevTokenTTL = 24 * time.Hour
)

// Options configure an Issuer.
type Options struct {
	// Dir is the data directory; the key lives in Dir/idp/key.json. Required.
	Dir string
	// Clock tells the time for iat and exp. Nil means the wall clock.
	Clock clock.Clock
	// Issuer is the iss claim. Default DefaultIssuer.
	Issuer string
}

// Issuer signs people's bearer tokens with one persisted Ed25519 key.
// It is safe for concurrent use.
type Issuer struct {
	name  string
	clock clock.Clock
	key   jwk.Key // private, with kid, alg, use
	jwks  []byte
}

// Open loads the issuer key under opts.Dir/idp, creating it on first use.
func Open(opts Options) (*Issuer, error) {
	if opts.Dir == "" {
		return nil, fmt.Errorf("%w: Dir is required (the key is kept under Dir/idp)", ErrInvalidOptions)
	}
	if opts.Clock == nil {
		opts.Clock = clock.Wall{}
	}
	if opts.Issuer == "" {
		opts.Issuer = DefaultIssuer
	}
	key, err := loadOrCreateKey(filepath.Join(opts.Dir, "idp"))
	if err != nil {
		return nil, err
	}
	pub, err := key.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("%w: public key: %w", ErrKeyStore, err)
	}
	set := jwk.NewSet()
	if err := set.AddKey(pub); err != nil {
		return nil, fmt.Errorf("%w: JWKS: %w", ErrKeyStore, err)
	}
	doc, err := json.Marshal(set)
	if err != nil {
		return nil, fmt.Errorf("%w: JWKS: %w", ErrKeyStore, err)
	}
	return &Issuer{name: opts.Issuer, clock: opts.Clock, key: key, jwks: doc}, nil
}

// Name returns the iss claim this issuer signs with; the sidecar trusts
// tokens whose iss is this name and whose key is in JWKS.
func (i *Issuer) Name() string { return i.name }

// claims is the payload of a person's token. Money fields are money.Cents,
// so they are JSON integers.
type claims struct {
	Iss           string      `json:"iss"`
	Sub           string      `json:"sub"`
	Aud           string      `json:"aud"`
	Role          string      `json:"role"`
	Region        string      `json:"region,omitempty"`
	Scopes        []string    `json:"scopes"`
	RefundCeiling money.Cents `json:"refund_ceiling,omitempty"`
	ApproveLimit  money.Cents `json:"approve_limit,omitempty"`
	IAT           int64       `json:"iat"`
	Exp           int64       `json:"exp"`
	JTI           string      `json:"jti"`
}

// Sign returns a bearer token (JWS compact) for p, valid for ttl from now.
func (i *Issuer) Sign(p fixture.Person, ttl time.Duration) (string, error) {
	if p.ID == "" {
		return "", fmt.Errorf("%w: the person has no id (sub)", ErrInvalidPerson)
	}
	if ttl < time.Second {
		return "", fmt.Errorf("%w: lifetime %s for %s must be at least one second", ErrInvalidPerson, ttl, p.ID)
	}
	scopes := p.Scopes
	if scopes == nil {
		scopes = []string{}
	}
	iat := i.clock.Now().Unix()
	body, err := json.Marshal(claims{
		Iss:           i.name,
		Sub:           p.ID,
		Aud:           Audience,
		Role:          p.Role,
		Region:        p.Region,
		Scopes:        scopes,
		RefundCeiling: p.RefundCeiling,
		ApproveLimit:  p.ApproveLimit,
		IAT:           iat,
		Exp:           iat + int64(ttl/time.Second),
		JTI:           rand.Text(),
	})
	if err != nil {
		return "", fmt.Errorf("idp: encode claims for %s: %w", p.ID, err)
	}
	return i.sign(p.ID, body)
}

// sign signs body, the claims of a token for person id, as a compact JWS
// with the issuer's key.
func (i *Issuer) sign(id string, body []byte) (string, error) {
	hdr := jws.NewHeaders()
	if err := hdr.Set(jws.TypeKey, "JWT"); err != nil {
		return "", fmt.Errorf("idp: header: %w", err)
	}
	tok, err := jws.Sign(body, jws.WithKey(jwa.EdDSA(), i.key, jws.WithProtectedHeaders(hdr)))
	if err != nil {
		return "", fmt.Errorf("idp: sign for %s: %w", id, err)
	}
	return string(tok), nil
}

// Tokens signs a token for each person, keyed by id: the content of
// dev-tokens.json.
func (i *Issuer) Tokens(people []fixture.Person, ttl time.Duration) (map[string]string, error) {
	out := make(map[string]string, len(people))
	for _, p := range people {
		tok, err := i.Sign(p, ttl)
		if err != nil {
			return nil, err
		}
		out[p.ID] = tok
	}
	return out, nil
}

// JWKS returns the issuer's public key set (one key, kid KeyID) as the
// caller's own copy; dev mode hands it to the sidecar's authn in process.
func (i *Issuer) JWKS() jwk.Set {
	set, err := jwk.Parse(i.jwks)
	if err != nil {
		// Produced by json.Marshal of a valid set in Open.
		panic(fmt.Sprintf("idp: parse own JWKS: %v", err))
	}
	return set
}

// JWKSJSON returns the public JWKS document.
func (i *Issuer) JWKSJSON() []byte { return append([]byte(nil), i.jwks...) }

// JWKSHandler serves the public JWKS document (GET or HEAD).
func (i *Issuer) JWKSHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			w.WriteHeader(http.StatusMethodNotAllowed)
			_, _ = w.Write([]byte(`{"error":{"code":"method_not_allowed","message":"use GET to read the JWKS"}}`))
			return
		}
		_, _ = w.Write(i.jwks)
	})
}

// loadOrCreateKey reads dir/key.json, or generates and persists a key.
func loadOrCreateKey(dir string) (jwk.Key, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("%w: create %s: %w", ErrKeyStore, dir, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("%w: chmod %s: %w", ErrKeyStore, dir, err)
	}
	path := filepath.Join(dir, "key.json")
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		if err := os.Chmod(path, 0o600); err != nil {
			return nil, fmt.Errorf("%w: chmod %s: %w", ErrKeyStore, path, err)
		}
		key, err := jwk.ParseKey(data)
		if err != nil {
			return nil, fmt.Errorf("%w: %s is not a JWK (delete it to start with a new key; earlier tokens will stop verifying): %w", ErrKeyStore, path, err)
		}
		var raw ed25519.PrivateKey
		if err := jwk.Export(key, &raw); err != nil {
			return nil, fmt.Errorf("%w: %s is not an Ed25519 private key: %w", ErrKeyStore, path, err)
		}
		return key, nil
	case errors.Is(err, os.ErrNotExist):
		return createKey(dir, path)
	default:
		return nil, fmt.Errorf("%w: read %s: %w", ErrKeyStore, path, err)
	}
}

func createKey(dir, path string) (jwk.Key, error) {
	_, raw, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("%w: generate: %w", ErrKeyStore, err)
	}
	key, err := jwk.Import(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: import: %w", ErrKeyStore, err)
	}
	for name, v := range map[string]any{jwk.KeyIDKey: KeyID, jwk.AlgorithmKey: jwa.EdDSA(), jwk.KeyUsageKey: jwk.ForSignature} {
		if err := key.Set(name, v); err != nil {
			return nil, fmt.Errorf("%w: set %s: %w", ErrKeyStore, name, err)
		}
	}
	data, err := json.Marshal(key)
	if err != nil {
		return nil, fmt.Errorf("%w: encode: %w", ErrKeyStore, err)
	}
	// Write a temporary file and link it into place: a crash never leaves
	// a half-written key, and when two processes start on a fresh
	// directory at once the second keeps the first one's key instead of
	// replacing it (which would invalidate the tokens it handed out).
	f, err := os.CreateTemp(dir, ".tmp-key-*")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKeyStore, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Link(tmp, path)
		if errors.Is(werr, os.ErrExist) {
			return loadOrCreateKey(dir)
		}
	}
	if werr != nil {
		return nil, fmt.Errorf("%w: write %s: %w", ErrKeyStore, path, werr)
	}
	return key, nil
}
