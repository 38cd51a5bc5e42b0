package policy

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io/fs"
	"testing/fstest"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"
)

// Bundle signatures are OPA's own: a .signatures.json file holding a JWS
// over the sha256 of every other file, as `opa build --signing-key` writes
// it, so that bundles signed by OPA and by `countersign bundle build
// --signing-key` verify alike. The algorithm follows from the key: RSA
// signs and verifies RS256, ECDSA ES256, ES384 or ES512 by its curve,
// Ed25519 EdDSA. OPA checks the algorithm of its key configuration, not
// the token's, so an RSA bundle signed PS256 does not verify.

// DefaultKeyID is the key id OPA signs with when it is given none.
const DefaultKeyID = "default"

// Verifier checks bundle signatures against one public key. An engine
// with a Verifier (Options.Verifier) activates and restores only bundles
// it verifies.
type Verifier struct {
	keyID string
	key   *bundle.KeyConfig
}

// NewVerifier returns a Verifier for a PEM public key (PKIX "PUBLIC KEY",
// PKCS #1 "RSA PUBLIC KEY" or a "CERTIFICATE") known by keyID, "" meaning
// DefaultKeyID. A signature must name that key id (OPA writes it as the
// token's kid).
func NewVerifier(publicKeyPEM []byte, keyID string) (*Verifier, error) {
	block, _ := pem.Decode(publicKeyPEM)
	if block == nil {
		return nil, fmt.Errorf("policy: verification key: no PEM block; give the public key as PEM")
	}
	var pub crypto.PublicKey
	var err error
	switch block.Type {
	case "PUBLIC KEY":
		pub, err = x509.ParsePKIXPublicKey(block.Bytes)
	case "RSA PUBLIC KEY":
		pub, err = x509.ParsePKCS1PublicKey(block.Bytes)
	case "CERTIFICATE":
		var cert *x509.Certificate
		if cert, err = x509.ParseCertificate(block.Bytes); err == nil {
			pub = cert.PublicKey
		}
	default:
		return nil, fmt.Errorf("policy: verification key: a PEM %q block is not a public key; give the public key, not the private one", block.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("policy: verification key: %w", err)
	}
	alg, err := algorithm(pub)
	if err != nil {
		return nil, fmt.Errorf("policy: verification key: %w", err)
	}
	if keyID == "" {
		keyID = DefaultKeyID
	}
	return &Verifier{keyID: keyID, key: &bundle.KeyConfig{Key: string(publicKeyPEM), Algorithm: alg}}, nil
}

// Verify reports ErrSignatureInvalid unless archive carries a
// .signatures.json whose token the key verifies and whose file hashes
// cover exactly the archive's other files.
func (v *Verifier) Verify(archive []byte) error {
	// No key id in the config: OPA then takes the signature's, which must
	// be ours, where a configured one would override it.
	config := bundle.NewVerificationConfig(map[string]*bundle.KeyConfig{v.keyID: v.key}, "", "", nil)
	_, err := bundle.NewCustomReader(bundle.NewTarballLoaderWithBaseURL(bytes.NewReader(archive), "")).
		WithBundleVerificationConfig(config).
		WithRegoVersion(ast.RegoV1).
		WithSizeLimitBytes(MaxUnpackedBytes).
		Read()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrSignatureInvalid, err)
	}
	return nil
}

// Signer signs bundles with one private key.
type Signer struct {
	keyID  string
	config *bundle.SigningConfig
}

// NewSigner returns a Signer for a PEM private key (PKCS #8 "PRIVATE
// KEY", PKCS #1 "RSA PRIVATE KEY" or SEC 1 "EC PRIVATE KEY") whose
// signatures name keyID, "" meaning DefaultKeyID.
func NewSigner(privateKeyPEM []byte, keyID string) (*Signer, error) {
	block, _ := pem.Decode(privateKeyPEM)
	if block == nil {
		return nil, fmt.Errorf("policy: signing key: no PEM block; give the private key as PEM")
	}
	var key crypto.Signer
	var err error
	switch block.Type {
	case "PRIVATE KEY":
		var k any
		if k, err = x509.ParsePKCS8PrivateKey(block.Bytes); err == nil {
			key, _ = k.(crypto.Signer)
		}
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("policy: signing key: a PEM %q block is not a private key", block.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("policy: signing key: %w", err)
	}
	if key == nil {
		return nil, fmt.Errorf("policy: signing key: not a key that signs")
	}
	alg, err := algorithm(key.Public())
	if err != nil {
		return nil, fmt.Errorf("policy: signing key: %w", err)
	}
	if keyID == "" {
		keyID = DefaultKeyID
	}
	return &Signer{keyID: keyID, config: bundle.NewSigningConfig(string(privateKeyPEM), alg, "")}, nil
}

// Sign builds the bundle directory at the root of fsys (see Build) with a
// .signatures.json over its files.
func (s *Signer) Sign(fsys fs.FS) ([]byte, error) {
	if _, err := fs.Stat(fsys, ".signatures.json"); err == nil {
		return nil, fmt.Errorf("policy: sign bundle: it is already signed; build it from its files without .signatures.json")
	}
	archive, err := Build(fsys)
	if err != nil {
		return nil, err
	}
	raw, err := readBundle(archive)
	if err != nil {
		return nil, err
	}
	if err := raw.GenerateSignature(s.config, s.keyID, false); err != nil {
		return nil, fmt.Errorf("policy: sign bundle: %w", err)
	}
	signatures, err := json.MarshalIndent(raw.Signatures, "", " ")
	if err != nil {
		return nil, fmt.Errorf("policy: sign bundle: %w", err)
	}
	signed, err := copyFS(fsys)
	if err != nil {
		return nil, fmt.Errorf("policy: sign bundle: %w", err)
	}
	signed[".signatures.json"] = &fstest.MapFile{Data: signatures}
	return Build(signed)
}

// algorithm is the JWS algorithm a key signs and verifies with.
func algorithm(pub crypto.PublicKey) (string, error) {
	switch k := pub.(type) {
	case *rsa.PublicKey:
		return "RS256", nil
	case ed25519.PublicKey:
		return "EdDSA", nil
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256():
			return "ES256", nil
		case elliptic.P384():
			return "ES384", nil
		case elliptic.P521():
			return "ES512", nil
		}
	}
	return "", fmt.Errorf("a %T key is not one of RSA, ECDSA P-256/384/521 or Ed25519", pub)
}
