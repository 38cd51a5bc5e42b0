package main

import (
	"strings"
	"testing"

	"github.com/countersign/countersign/executor/policy"
)

func TestExternalSystemsFlags(t *testing.T) {
	_, err := externalSystems("", "ftp://orders", "", "")
	if err == nil {
		t.Fatal("no error for missing flags")
	}
	for _, want := range []string{"--ledger", "--orders", "--issuer must", "--issuer-jwks", "--dev"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	ext, err := externalSystems("http://127.0.0.1:1", "https://orders.example", "idp", "https://idp.example/jwks.json")
	if err != nil || ext.Issuers[0].JWKSURL == "" || ext.Issuers[0].JWKSFile != "" {
		t.Fatalf("%+v %v", ext, err)
	}
	ext, err = externalSystems("http://127.0.0.1:1", "http://127.0.0.1:2", "idp", "/etc/countersign/jwks.json")
	if err != nil || ext.Issuers[0].JWKSFile != "/etc/countersign/jwks.json" {
		t.Fatalf("%+v %v", ext, err)
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
