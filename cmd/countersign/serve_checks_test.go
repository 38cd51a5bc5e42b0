package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lestrrat-go/jwx/v3/jwk"
)

// --dev with production flags it would ignore is refused before anything
// starts, naming every such flag given and what to do.
func TestServeDevRefusesProductionFlags(t *testing.T) {
	cases := []struct {
		name string
		args []string
		says []string
	}{
		{"the systems of record and the issuer", []string{"--ledger", "https://ledger.example", "--orders", "https://orders.example", "--issuer", "idp", "--issuer-jwks", "/etc/jwks.json"},
			[]string{"--ledger, --orders, --issuer, --issuer-jwks:", "simulated ledger", "drop them, or drop --dev"}},
		{"one flag of each kind, all named at once", []string{"--orders", "https://orders.example", "--bundle-verification-key", "/etc/k.pem", "--oidc-client-id", "cs"},
			[]string{"--orders, --bundle-verification-key, --oidc-client-id:", "simulated ledger", "--dev loads the embedded releases", "--dev signs leads in at the dev identity provider"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			_, err := runRoot(t, append([]string{"serve", "--dev", "--data", dir}, tc.args...)...)
			if err == nil {
				t.Fatal("serve --dev started with production flags")
			}
			for _, w := range tc.says {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q does not say %q", err, w)
				}
			}
			if entries, _ := os.ReadDir(dir); len(entries) > 0 {
				t.Errorf("refused, yet wrote %d entries under --data", len(entries))
			}
		})
	}
	t.Run("--agent and --store stay dev flags", func(t *testing.T) {
		if err := (serveFlags{dev: true, agent: "support-agent", storeURL: "postgres://db/cs"}).devConflicts(); err != nil {
			t.Errorf("refused: %v", err)
		}
	})
}

// A JWKS file no token could verify against, or one that leaks the
// issuer's private key, stops the production serve with a line that says
// what to put in it instead.
func TestServeRefusesAnUnusableJWKSFile(t *testing.T) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		key  any // nil: an empty set
		says []string
	}{
		{"a file with no keys", nil, []string{"holds no keys", "public signing keys"}},
		{"a file with a private key", priv, []string{`key "k1" is a private key`, "only its public half"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			file := writeJWKS(t, tc.key)
			_, err := runRoot(t, "serve", "--data", t.TempDir(), "--agent", "support-agent", "--ledger", "http://127.0.0.1:1",
				"--orders", "http://127.0.0.1:1", "--issuer", "idp", "--issuer-jwks", file)
			if err == nil {
				t.Fatal("serve started")
			}
			for _, w := range append(tc.says, file) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q does not say %q", err, w)
				}
			}
		})
	}
}

// writeJWKS writes a JWKS file holding key as kid k1, or no key when key
// is nil.
func writeJWKS(t *testing.T, key any) string {
	t.Helper()
	set := jwk.NewSet()
	if key != nil {
		k, err := jwk.Import(key)
		if err != nil {
			t.Fatal(err)
		}
		if err := k.Set(jwk.KeyIDKey, "k1"); err != nil {
			t.Fatal(err)
		}
		if err := set.AddKey(k); err != nil {
			t.Fatal(err)
		}
	}
	b, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// The audit checkpoint flags are checked before anything starts, every
// problem named at once; a key file must hold an Ed25519 key.
func TestServeRefusesBadAuditCheckpointFlags(t *testing.T) {
	notAKey := filepath.Join(t.TempDir(), "not-a-key.pem")
	if err := os.WriteFile(notAKey, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	_, err := runRoot(t, "serve", "--dev", "--data", dir, "--audit-checkpoint-every", "0", "--audit-checkpoint-interval", "-1s",
		"--audit-checkpoint-url", "ftp://sink", "--audit-key-file", notAKey)
	if err == nil {
		t.Fatal("serve started")
	}
	for _, w := range []string{"--audit-checkpoint-every 0 must be over zero", "--audit-checkpoint-interval -1s must be over zero",
		"--audit-checkpoint-url must be an absolute http(s) URL", "--audit-key-file", "openssl genpkey -algorithm ed25519"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%q does not say %q", err, w)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) > 0 {
		t.Errorf("refused, yet wrote %d entries under --data", len(entries))
	}
}
