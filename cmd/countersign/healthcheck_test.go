package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"net"
	"strings"
	"testing"

	"github.com/lestrrat-go/jwx/v3/jwk"

	"github.com/countersign/countersign/cmd/devstack"
	"github.com/countersign/countersign/cmd/stack"
	"github.com/countersign/countersign/sidecar/authn"
)

func TestHealthcheck(t *testing.T) {
	dev, err := devstack.Start(context.Background(), devstack.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	bare, err := stack.Start(context.Background(), bundlelessProduction(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bare.Close() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nobody := ln.Addr().String()
	ln.Close()

	cases := []struct {
		name, addr string
		ready      bool
		says       string
	}{
		{"a ready sidecar exits 0", strings.TrimPrefix(dev.Endpoints.Sidecar, "http://"), true, "ready"},
		{"a sidecar with no bundle exits 1 with its reason", strings.TrimPrefix(bare.URL, "http://"), false, "not ready: no policy bundle is active"},
		{"nothing listening exits 1 as unreachable", nobody, false, "unreachable: "},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := runRoot(t, "healthcheck", "--addr", tc.addr)
			if tc.ready {
				if err != nil || strings.TrimSpace(out) != tc.says {
					t.Fatalf("healthcheck: %v, printed %q", err, out)
				}
				return
			}
			if err == nil || exitCode(err) != 1 {
				t.Fatalf("healthcheck: %v (exit %d), want exit 1", err, exitCode(err))
			}
			if !strings.HasPrefix(err.Error(), tc.says) || strings.Contains(err.Error(), "\n") {
				t.Errorf("healthcheck says %q, want one line starting %q", err, tc.says)
			}
		})
	}
}

func TestHealthcheckAddress(t *testing.T) {
	for listen, want := range map[string]string{
		"0.0.0.0:8080":    "127.0.0.1:8080",
		":9000":           "127.0.0.1:9000",
		"[::]:8080":       "127.0.0.1:8080",
		"10.0.0.5:8080":   "10.0.0.5:8080",
		"127.0.0.1:12345": "127.0.0.1:12345",
	} {
		if got := dialAddr(listen); got != want {
			t.Errorf("dialAddr(%q) = %q, want %q", listen, got, want)
		}
	}
	t.Run("the default follows COUNTERSIGN_LISTEN", func(t *testing.T) {
		t.Setenv("COUNTERSIGN_LISTEN", "0.0.0.0:9999")
		if got := newHealthcheckCmd().Flag("addr").DefValue; got != "0.0.0.0:9999" {
			t.Errorf("--addr default %q, want COUNTERSIGN_LISTEN's", got)
		}
		t.Setenv("COUNTERSIGN_LISTEN", "")
		if got := newHealthcheckCmd().Flag("addr").DefValue; got != defaultHealthAddr {
			t.Errorf("--addr default %q, want %s", got, defaultHealthAddr)
		}
	})
}

// bundlelessProduction is a production stack with no bundle: alive, not
// ready.
func bundlelessProduction(t *testing.T) stack.Options {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	key, err := jwk.Import(pub)
	if err != nil {
		t.Fatal(err)
	}
	if err := key.Set(jwk.KeyIDKey, "k1"); err != nil {
		t.Fatal(err)
	}
	set := jwk.NewSet()
	if err := set.AddKey(key); err != nil {
		t.Fatal(err)
	}
	return stack.Options{DataDir: t.TempDir(), Agent: "support-agent", LedgerURL: "http://127.0.0.1:1", OrdersURL: "http://127.0.0.1:1",
		Issuers: []authn.Issuer{{Name: "idp", Keys: set}}}
}
