package audit

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/countersign/countersign/executor/audit/jcs"
)

// Signer signs checkpoints with the sidecar's own Ed25519 key. The key
// signs nothing else, so a checkpoint's signature cannot be mistaken for
// any other statement of the sidecar's.
type Signer struct {
	key ed25519.PrivateKey
	kid string
}

// NewSigner returns a Signer for key, whose key id is the RFC 7638
// thumbprint of its public JWK (base64url of sha256 over the JWK's
// required members), which anyone recomputes from the published key.
func NewSigner(key ed25519.PrivateKey) Signer {
	return Signer{key: key, kid: thumbprint(key.Public().(ed25519.PublicKey))}
}

// KeyID is the id checkpoints name the key by (their "kid").
func (s Signer) KeyID() string { return s.kid }

// JWK is the public key as published at
// GET /.well-known/countersign-audit-keys.
func (s Signer) JWK() JWK { return newJWK(s.key.Public().(ed25519.PublicKey)) }

// JWK is a public Ed25519 key as RFC 8037 writes it.
type JWK struct {
	Kty string `json:"kty"` // "OKP"
	Crv string `json:"crv"` // "Ed25519"
	X   string `json:"x"`   // the public key, base64url without padding
	Kid string `json:"kid"`
	Alg string `json:"alg"` // "EdDSA"
	Use string `json:"use"` // "sig"
}

// JWKS is a set of keys, the body of the keys endpoint.
type JWKS struct {
	Keys []JWK `json:"keys"`
}

func newJWK(pub ed25519.PublicKey) JWK {
	return JWK{Kty: "OKP", Crv: "Ed25519", X: base64.RawURLEncoding.EncodeToString(pub), Kid: thumbprint(pub), Alg: "EdDSA", Use: "sig"}
}

// thumbprint is RFC 7638's: sha256 over the canonical JSON of the
// required members crv, kty, x.
func thumbprint(pub ed25519.PublicKey) string {
	b, err := jcs.Marshal(map[string]string{"crv": "Ed25519", "kty": "OKP", "x": base64.RawURLEncoding.EncodeToString(pub)})
	if err != nil {
		panic(err) // three strings always canonicalize
	}
	sum := sha256.Sum256(b)
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// LoadOrCreateKey reads the Ed25519 private key in the PEM file path
// (PKCS #8, "PRIVATE KEY", as `openssl genpkey -algorithm ed25519`
// writes it) or, when the file does not exist, creates it with a fresh
// key (mode 0600) and reports created.
func LoadOrCreateKey(path string) (key ed25519.PrivateKey, created bool, err error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		key, err = createKey(path)
		return key, err == nil, err
	}
	if err != nil {
		return nil, false, fmt.Errorf("audit key: %w", err)
	}
	key, err = parsePrivateKey(raw)
	if err != nil {
		return nil, false, fmt.Errorf("audit key %s: %w", path, err)
	}
	return key, false, nil
}

// LoadKey reads the Ed25519 private key in the PEM file path; a missing
// file is an error (a key named by the operator is never made up).
func LoadKey(path string) (ed25519.PrivateKey, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("audit key: %w", err)
	}
	key, err := parsePrivateKey(raw)
	if err != nil {
		return nil, fmt.Errorf("audit key %s: %w", path, err)
	}
	return key, nil
}

func parsePrivateKey(raw []byte) (ed25519.PrivateKey, error) {
	block, _ := pem.Decode(raw)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("%w: not a PEM \"PRIVATE KEY\" block; create one with `openssl genpkey -algorithm ed25519 -out FILE`", ErrKey)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrKey, err)
	}
	key, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%w: a %T, not an Ed25519 key", ErrKey, k)
	}
	return key, nil
}

func createKey(path string) (ed25519.PrivateKey, error) {
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("audit key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("audit key: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("audit key: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit key: %w", err)
	}
	if err := pem.Encode(f, &pem.Block{Type: "PRIVATE KEY", Bytes: der}); err != nil {
		f.Close()
		return nil, fmt.Errorf("audit key %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, fmt.Errorf("audit key %s: %w", path, err)
	}
	return key, f.Close()
}

// ParseKeys reads the public keys a reviewer trusts: a JWKS (the body of
// GET /.well-known/countersign-audit-keys), one JWK, or a PEM "PUBLIC
// KEY" (`openssl pkey -pubout`). Keys are returned by key id, the id
// recomputed from the key (a JWK whose kid differs is refused).
func ParseKeys(data []byte) (map[string]ed25519.PublicKey, error) {
	keys := map[string]ed25519.PublicKey{}
	trimmed := strings.TrimSpace(string(data))
	if strings.HasPrefix(trimmed, "-----BEGIN") {
		block, _ := pem.Decode([]byte(trimmed))
		if block == nil || block.Type != "PUBLIC KEY" {
			return nil, fmt.Errorf("%w: a PEM file that is not a \"PUBLIC KEY\"", ErrKey)
		}
		k, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrKey, err)
		}
		pub, ok := k.(ed25519.PublicKey)
		if !ok {
			return nil, fmt.Errorf("%w: a %T, not an Ed25519 key", ErrKey, k)
		}
		keys[thumbprint(pub)] = pub
		return keys, nil
	}
	var set JWKS
	if err := strictUnmarshal(data, &set); err != nil || set.Keys == nil {
		var one JWK
		if err1 := strictUnmarshal(data, &one); err1 != nil {
			return nil, fmt.Errorf("%w: neither a JWKS ({\"keys\": [...]}), a JWK nor a PEM public key", ErrKey)
		}
		set.Keys = []JWK{one}
	}
	for _, k := range set.Keys {
		raw, err := base64.RawURLEncoding.DecodeString(k.X)
		if k.Kty != "OKP" || k.Crv != "Ed25519" || err != nil || len(raw) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("%w: key %q is not an OKP Ed25519 key with a 32-byte x", ErrKey, k.Kid)
		}
		pub := ed25519.PublicKey(raw)
		if kid := thumbprint(pub); k.Kid != "" && k.Kid != kid {
			return nil, fmt.Errorf("%w: key %q: its thumbprint is %q", ErrKey, k.Kid, kid)
		}
		keys[thumbprint(pub)] = pub
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: no key", ErrKey)
	}
	return keys, nil
}

// sortedJWKs is keys in key id order.
func sortedJWKs(keys []JWK) []JWK {
	slices.SortFunc(keys, func(a, b JWK) int { return strings.Compare(a.Kid, b.Kid) })
	return keys
}

func strictUnmarshal(data []byte, v any) error {
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("data after the value")
	}
	return nil
}
