package policy_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/countersign/countersign/bundles"
	"github.com/countersign/countersign/executor/policy"
)

// key is a key pair as PEM files, as an operator would hold them.
type key struct {
	private, public string // paths
	publicPEM       []byte
}

func newKey(t *testing.T, alg string) key {
	t.Helper()
	var signer crypto.Signer
	var err error
	switch alg {
	case "RS256":
		signer, err = rsa.GenerateKey(rand.Reader, 2048)
	case "ES256":
		signer, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	}
	if err != nil {
		t.Fatal(err)
	}
	priv, err := x509.MarshalPKCS8PrivateKey(signer)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := x509.MarshalPKIXPublicKey(signer.Public())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	k := key{private: filepath.Join(dir, "key.pem"), public: filepath.Join(dir, "key.pub.pem"),
		publicPEM: pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})}
	if err := os.WriteFile(k.private, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: priv}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(k.public, k.publicPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	return k
}

func verifier(t *testing.T, k key, id string) *policy.Verifier {
	t.Helper()
	v, err := policy.NewVerifier(k.publicPEM, id)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// opaBuild signs release p1's files with OPA's own CLI.
func opaBuild(t *testing.T, k key, alg string) []byte {
	t.Helper()
	files, err := bundles.Open("p1")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "p1")
	if err := os.CopyFS(dir, files); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "p1.tar.gz")
	cmd := exec.Command("go", "tool", "opa", "build", "-b", dir, "--signing-key", k.private, "--signing-alg", alg, "-o", out)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("opa build: %v\n%s", err, msg)
	}
	archive, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return archive
}

// tamper changes one byte of call/call.rego after signing.
func tamper(t *testing.T, archive []byte) []byte {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	tr := tar.NewReader(gz)
	changed := false
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(h.Name, "call/call.rego") {
			body[bytes.IndexByte(body, '#')+2]++ // a letter of the first comment: the Rego still parses
			changed = true
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if !changed {
		t.Fatal("no call/call.rego in the archive")
	}
	return buf.Bytes()
}

// Bundles signed by `opa build --signing-key` verify; changed after
// signing, signed by another key, under another key id or not at all,
// they are refused.
func TestVerifyOPASignedBundles(t *testing.T) {
	for _, alg := range []string{"RS256", "ES256"} {
		t.Run(alg, func(t *testing.T) {
			k := newKey(t, alg)
			signed := opaBuild(t, k, alg)
			if err := verifier(t, k, "").Verify(signed); err != nil {
				t.Fatalf("opa build's signature: %v", err)
			}
			if _, err := policy.LoadArchive(signed); err != nil {
				t.Errorf("a signed bundle loads without a key too: %v", err)
			}
			unsigned, err := bundles.Archive("p1")
			if err != nil {
				t.Fatal(err)
			}
			refused := map[string]error{
				"one byte of a .rego changed":   verifier(t, k, "").Verify(tamper(t, signed)),
				"verified with another key":     verifier(t, newKey(t, alg), "").Verify(signed),
				"verified under another key id": verifier(t, k, "release-2026").Verify(signed),
				"unsigned":                      verifier(t, k, "").Verify(unsigned),
			}
			for what, err := range refused {
				if !errors.Is(err, policy.ErrSignatureInvalid) {
					t.Errorf("%s: %v, want ErrSignatureInvalid", what, err)
				}
			}
		})
	}
}

// Our signer writes OPA's format: its bundles verify, under the key id it
// names, and only with its key.
func TestSign(t *testing.T) {
	k := newKey(t, "ES256")
	keyPEM, err := os.ReadFile(k.private)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := policy.NewSigner(keyPEM, "release-2026")
	if err != nil {
		t.Fatal(err)
	}
	files, err := bundles.Open("p3")
	if err != nil {
		t.Fatal(err)
	}
	signed, err := signer.Sign(files)
	if err != nil {
		t.Fatal(err)
	}
	if err := verifier(t, k, "release-2026").Verify(signed); err != nil {
		t.Errorf("our signature: %v", err)
	}
	if err := verifier(t, k, "").Verify(signed); !errors.Is(err, policy.ErrSignatureInvalid) {
		t.Errorf("under the default key id: %v, want ErrSignatureInvalid", err)
	}
	if err := verifier(t, k, "release-2026").Verify(tamper(t, signed)); !errors.Is(err, policy.ErrSignatureInvalid) {
		t.Errorf("tampered: %v, want ErrSignatureInvalid", err)
	}
	if _, err := policy.NewSigner(k.publicPEM, ""); err == nil {
		t.Error("a public key was taken for a signing key")
	}
	if _, err := policy.NewVerifier(keyPEM, ""); err == nil {
		t.Error("a private key was taken for a verification key")
	}
}

// An engine with a Verifier refuses an unsigned bundle on every path,
// break glass included, records nothing and keeps the active bundle.
func TestEngineRequiresSignatures(t *testing.T) {
	k := newKey(t, "RS256")
	h := &policy.MemHistory{}
	e := policy.New(policy.Options{History: h, Timeout: relaxed, Verifier: verifier(t, k, "")})
	signed, err := policy.LoadArchive(opaBuild(t, k, "RS256"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Activate(ctx, signed, policy.Activation{By: "ops-ida"}); err != nil {
		t.Fatalf("signed p1: %v", err)
	}
	unsigned := embedded(t, "p3")
	for _, a := range []policy.Activation{{By: "ops-ida"}, {By: "ops-jon", Proposer: "ops-ida", BreakGlass: true, Reason: "incident"}} {
		if _, err := e.Activate(ctx, unsigned, a); !errors.Is(err, policy.ErrSignatureInvalid) {
			t.Errorf("unsigned p3 (break glass %v): %v, want ErrSignatureInvalid", a.BreakGlass, err)
		}
	}
	if err := e.Restore(unsigned); !errors.Is(err, policy.ErrSignatureInvalid) {
		t.Errorf("restore unsigned p3: %v, want ErrSignatureInvalid", err)
	}
	if e.Active() != signed || len(h.Records()) != 1 {
		t.Errorf("active %s with %d records, want the signed p1 and its one record", e.Revision(), len(h.Records()))
	}
}
