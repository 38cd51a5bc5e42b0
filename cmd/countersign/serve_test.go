package main

import (
	"strings"
	"testing"

	"github.com/countersign/countersign/executor/policy"
)

// Without --dev every missing or malformed flag is named at once, with
// the way out (--dev).
func TestProductionFlags(t *testing.T) {
	_, err := serveFlags{ordersURL: "ftp://orders"}.production()
	if err == nil {
		t.Fatal("no error for missing flags")
	}
	for _, want := range []string{"--agent", "--ledger", "--orders", "--issuer must", "--issuer-jwks", "--dev"} {
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
