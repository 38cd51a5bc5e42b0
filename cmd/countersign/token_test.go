package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/countersign/countersign/executor/sim/idp"
	"github.com/countersign/countersign/sidecar/authn"
)

func runToken(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newTokenCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return strings.TrimSpace(out.String()), err
}

func TestTokenCommand(t *testing.T) {
	dir := t.TempDir()
	tok, err := runToken(t, "--sub", "lead-dee", "--data", dir, "--ttl", "2h")
	if err != nil {
		t.Fatal(err)
	}
	// The key the command created is the one dev mode trusts.
	iss, err := idp.Open(idp.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	v, err := authn.New(context.Background(), authn.Options{Issuers: []authn.Issuer{{Name: iss.Name(), Keys: iss.JWKS()}}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := v.Verify(context.Background(), tok)
	if err != nil {
		t.Fatalf("printed token does not verify: %v", err)
	}
	if p.ID != "lead-dee" || p.Role != "lead" || p.ApproveLimit != 50000 {
		t.Errorf("principal %+v", p)
	}
}

func TestTokenCommandRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown person", []string{"--sub", "rep-zed", "--data", t.TempDir()}, "rep-ana, rep-ben, rep-cy, lead-dee, lead-eli, lead-fay, ops-ida"},
		{"no data", []string{"--sub", "rep-ana"}, "data"},
		{"zero ttl", []string{"--sub", "rep-ana", "--data", t.TempDir(), "--ttl", "0s"}, "ttl"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := runToken(t, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}
