package main

import (
	"io"
	"strings"
	"testing"
)

// --public-url reaches the production options, and one that is not a base
// URL is refused in the flag's terms before anything starts, in either
// mode.
func TestPublicURLFlag(t *testing.T) {
	if fl := newServeCmd().Flags().Lookup("public-url"); fl == nil || fl.DefValue != "" {
		t.Fatalf("serve --public-url: %+v, want a flag, empty by default", fl)
	}
	f := serveFlags{data: t.TempDir(), agent: "support-agent", ledgerURL: "http://127.0.0.1:1", ordersURL: "http://127.0.0.1:1",
		issuer: "https://idp.example", issuerJWKS: "https://idp.example/jwks.json", publicURL: "https://countersign.example.com"}
	o, err := f.production()
	if err != nil || o.PublicURL != "https://countersign.example.com" {
		t.Fatalf("production options: %q, %v", o.PublicURL, err)
	}
	for _, mode := range [][]string{{"--dev"}, {"--agent", "a", "--ledger", "http://127.0.0.1:1", "--orders", "http://127.0.0.1:1", "--issuer", "i", "--issuer-jwks", "/nonexistent"}} {
		cmd := newServeCmd()
		cmd.SetArgs(append(mode, "--data", t.TempDir(), "--public-url", "countersign.example.com"))
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "--public-url") || !strings.Contains(err.Error(), "write it like https://") {
			t.Errorf("%v with a public URL without a scheme: %v", mode, err)
		}
	}
}
