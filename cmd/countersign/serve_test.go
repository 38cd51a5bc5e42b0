package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/countersign/countersign/executor/policy"
)

// Without --dev every missing or malformed flag is named at once (serve
// adds the way out, --dev: TestServeNamesEverySettingToFix).
func TestProductionFlags(t *testing.T) {
	_, err := serveFlags{ordersURL: "ftp://orders"}.production()
	if err == nil {
		t.Fatal("no error for missing flags")
	}
	for _, want := range []string{"--agent", "--ledger", "--orders", "--issuer must", "--issuer-jwks"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	f := serveFlags{data: "/var/lib/cs", agent: "support-agent", ledgerURL: "http://127.0.0.1:1", ordersURL: "https://orders.example",
		issuer: "idp", issuerJWKS: "https://idp.example/jwks.json"}
	o, err := f.production()
	if err != nil || o.Issuers[0].JWKSURL == "" || o.Issuers[0].JWKSFile != "" || o.Agent != "support-agent" {
		t.Fatalf("%+v %v", o, err)
	}
	if err := o.Validate(); err != nil {
		t.Fatalf("the flags gave invalid options: %v", err)
	}
	f.issuerJWKS = "/etc/countersign/jwks.json"
	o, err = f.production()
	if err != nil || o.Issuers[0].JWKSFile != "/etc/countersign/jwks.json" {
		t.Fatalf("%+v %v", o, err)
	}
}

// --policy-timeout sets the deadline of each policy evaluation and defaults
// to the policy engine's own.
func TestPolicyTimeoutFlag(t *testing.T) {
	cmd := newServeCmd()
	f := cmd.Flags().Lookup("policy-timeout")
	if f == nil {
		t.Fatal("serve has no --policy-timeout")
	}
	if f.DefValue != policy.DefaultTimeout.String() {
		t.Errorf("default %s, want %s", f.DefValue, policy.DefaultTimeout)
	}
	if err := cmd.Flags().Parse([]string{"--policy-timeout", "250ms"}); err != nil || f.Value.String() != "250ms" {
		t.Errorf("parse 250ms: %v, %s", err, f.Value)
	}
}

// --bundle-verification-key gives the production options a verifier; a
// key that cannot be read or is not a public key is one more problem named
// at once; --dev, whose releases are unsigned, refuses it.
func TestBundleVerificationKeyFlag(t *testing.T) {
	dir := t.TempDir()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&priv.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	pub := filepath.Join(dir, "bundles.pub.pem")
	if err := os.WriteFile(pub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	f := serveFlags{data: dir, agent: "support-agent", ledgerURL: "http://127.0.0.1:1", ordersURL: "http://127.0.0.1:1",
		issuer: "idp", issuerJWKS: "https://idp.example/jwks.json", verificationKey: pub, verificationKeyID: "release"}
	o, err := f.production()
	if err != nil || o.BundleVerifier == nil {
		t.Fatalf("with a public key: %+v, %v", o.BundleVerifier, err)
	}
	for _, key := range []string{filepath.Join(dir, "missing.pem"), filepath.Join(dir)} {
		f.verificationKey = key
		if _, err := f.production(); err == nil || !strings.Contains(err.Error(), "--bundle-verification-key") {
			t.Errorf("key %s: %v, want a problem naming --bundle-verification-key", key, err)
		}
	}
	cmd := newServeCmd()
	cmd.SetArgs([]string{"--dev", "--data", dir, "--bundle-verification-key", pub})
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "--dev loads the embedded releases") {
		t.Errorf("--dev with a verification key: %v", err)
	}
	if d := newServeCmd().Flags().Lookup("bundle-verification-key-id"); d == nil || d.DefValue != policy.DefaultKeyID {
		t.Errorf("--bundle-verification-key-id default: %+v", d)
	}
}

// --mcp-allowed-origins lists the web origins whose pages may call /mcp:
// none by default; the production options carry what it lists; an entry
// that is not an origin is refused before anything starts, in the flag's
// terms, in either mode.
func TestMCPAllowedOriginsFlag(t *testing.T) {
	cmd := newServeCmd()
	fl := cmd.Flags().Lookup("mcp-allowed-origins")
	if fl == nil || fl.DefValue != "[]" {
		t.Fatalf("serve --mcp-allowed-origins: %+v, want a list, empty by default", fl)
	}
	if err := cmd.Flags().Parse([]string{"--mcp-allowed-origins", "https://a.example,https://b.example", "--mcp-allowed-origins", "null"}); err != nil {
		t.Fatal(err)
	}
	f := serveFlags{data: t.TempDir(), agent: "support-agent", ledgerURL: "http://127.0.0.1:1", ordersURL: "http://127.0.0.1:1",
		issuer: "idp", issuerJWKS: "https://idp.example/jwks.json", mcpOrigins: []string{"https://a.example", "null"}}
	o, err := f.production()
	if err != nil || strings.Join(o.MCPAllowedOrigins, " ") != "https://a.example null" {
		t.Fatalf("production options: %v, %v", o.MCPAllowedOrigins, err)
	}
	for _, mode := range [][]string{{"--dev"}, {"--agent", "a", "--ledger", "http://127.0.0.1:1", "--orders", "http://127.0.0.1:1", "--issuer", "i", "--issuer-jwks", "/nonexistent"}} {
		cmd := newServeCmd()
		cmd.SetArgs(append(mode, "--data", t.TempDir(), "--mcp-allowed-origins", "https://a.example/"))
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "--mcp-allowed-origins") || !strings.Contains(err.Error(), "trailing /") {
			t.Errorf("%v with an origin that has a path: %v", mode, err)
		}
	}
}

// --dispatch-token-ttl defaults to 15 s and is refused, with a reason a
// person acts on, at zero, past the receivers' 120 s lifetime check, or in
// fractions of a second, before anything starts.
func TestDispatchTokenTTLFlag(t *testing.T) {
	cmd := newServeCmd()
	f := cmd.Flags().Lookup("dispatch-token-ttl")
	if f == nil || f.DefValue != "15s" {
		t.Fatalf("serve --dispatch-token-ttl: %+v, want a flag defaulting to 15s", f)
	}
	for _, tc := range []struct{ value, says string }{
		{"0s", "over zero"},
		{"-1s", "over zero"},
		{"121s", "over 2m0s: the systems of record refuse"},
		{"1500ms", "whole seconds"},
	} {
		t.Run(tc.value, func(t *testing.T) {
			cmd := newServeCmd()
			cmd.SetArgs([]string{"--dev", "--data", t.TempDir(), "--dispatch-token-ttl", tc.value})
			cmd.SetOut(io.Discard)
			cmd.SetErr(io.Discard)
			err := cmd.Execute()
			if err == nil || !strings.Contains(err.Error(), "--dispatch-token-ttl") || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("serve --dispatch-token-ttl %s: %v, want a refusal saying %q", tc.value, err, tc.says)
			}
		})
	}
}

// --receiver-clock-skew defaults to the engine's 5 s and must be over zero.
func TestReceiverClockSkewFlag(t *testing.T) {
	cmd := newServeCmd()
	if f := cmd.Flags().Lookup("receiver-clock-skew"); f == nil || f.DefValue != "5s" {
		t.Fatalf("serve --receiver-clock-skew: %+v, want a flag defaulting to 5s", f)
	}
	cmd.SetArgs([]string{"--dev", "--data", t.TempDir(), "--receiver-clock-skew", "0s"})
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "--receiver-clock-skew 0s must be over zero") {
		t.Fatalf("serve --receiver-clock-skew 0s: %v", err)
	}
}

// --notify-webhook needs --notify-webhook-secret-file naming a file with a
// secret in it: a missing flag, a missing file, an empty file, a secret
// file without a webhook and a webhook that is not a URL are refused in
// either mode before anything starts, each saying what to do, and never
// repeating the webhook's URL (a chat service's URL is its credential).
func TestNotifyWebhookFlags(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	const hook = "https://hooks.example/services/SECRETPATH"
	prod := []string{"--agent", "a", "--ledger", "http://127.0.0.1:1", "--orders", "http://127.0.0.1:1", "--issuer", "i", "--issuer-jwks", "/nonexistent"}
	for _, tc := range []struct {
		name string
		args []string
		says []string
	}{
		{"a webhook without a secret file", []string{"--notify-webhook", hook}, []string{"--notify-webhook needs --notify-webhook-secret-file FILE", "openssl rand -hex 32 > FILE"}},
		{"a secret file that does not exist", []string{"--notify-webhook", hook, "--notify-webhook-secret-file", missing}, []string{"--notify-webhook-secret-file", "no such file", "openssl rand -hex 32 > " + missing}},
		{"an empty secret file", []string{"--notify-webhook", hook, "--notify-webhook-secret-file", empty}, []string{"--notify-webhook-secret-file", empty + " is empty", "openssl rand -hex 32 > " + empty}},
		{"a secret file without a webhook", []string{"--notify-webhook-secret-file", empty}, []string{"only used with --notify-webhook URL"}},
		{"a webhook that is not a URL", []string{"--notify-webhook", "hooks.example/SECRETPATH", "--notify-webhook-secret-file", empty}, []string{"--notify-webhook must be an absolute http(s) URL"}},
	} {
		for _, mode := range [][]string{{"--dev"}, prod} {
			t.Run(tc.name+" "+mode[0], func(t *testing.T) {
				cmd := newServeCmd()
				cmd.SetArgs(append(append([]string{"--data", t.TempDir()}, mode...), tc.args...))
				cmd.SetOut(io.Discard)
				cmd.SetErr(io.Discard)
				err := cmd.Execute()
				if err == nil {
					t.Fatal("serve started")
				}
				for _, w := range tc.says {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("%q does not say %q", err, w)
					}
				}
				if strings.Contains(err.Error(), "SECRETPATH") {
					t.Errorf("%q repeats the webhook URL", err)
				}
			})
		}
	}
}

// --oidc-issuer, --oidc-client-id and --oidc-client-secret-file come
// together (every missing one named at once), the secret is read from its
// file without surrounding white space, and --public-url, when given, is
// the base of the redirect URL; --dev signs in at its own provider.
func TestOIDCFlags(t *testing.T) {
	prod := serveFlags{data: "/var/lib/cs", agent: "support-agent", ledgerURL: "http://127.0.0.1:1", ordersURL: "https://orders.example",
		issuer: "idp", issuerJWKS: "https://idp.example/jwks.json"}
	if o, err := prod.production(); err != nil || o.SignIn != nil {
		t.Fatalf("without --oidc-*: %+v %v, want no sign-in", o.SignIn, err)
	}

	f := prod
	f.oidcIssuer, f.publicURL = "idp.example", "https://cs.example/approvals"
	_, err := f.production()
	for _, want := range []string{"--oidc-issuer must", "--oidc-client-id", "--oidc-client-secret-file", "--public-url"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}

	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("  s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f = prod
	f.oidcIssuer, f.oidcClientID, f.oidcSecretFile, f.publicURL = "https://idp.example", "countersign", secret, "https://cs.example"
	o, err := f.production()
	if err != nil || o.SignIn == nil || o.SignIn.ClientSecret != "s3cret" || o.SignIn.RedirectURL != "https://cs.example/login/callback" ||
		o.SignIn.Issuer != "https://idp.example" || o.SignIn.ClientID != "countersign" {
		t.Fatalf("%+v %v", o.SignIn, err)
	}
	f.publicURL = ""
	if o, err := f.production(); err != nil || o.SignIn.RedirectURL != "" {
		t.Errorf("without --public-url the redirect URL is left to the stack (its own address): %+v %v", o.SignIn, err)
	}

	dev := serveFlags{dev: true, data: t.TempDir(), oidcIssuer: "https://idp.example"}
	if err := dev.run(newServeCmd(), noEnv); err == nil || !strings.Contains(err.Error(), "--dev signs leads in at the dev identity provider") {
		t.Errorf("--dev with --oidc-issuer: %v", err)
	}
}
