package stack_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/countersign/countersign/bundles"
	"github.com/countersign/countersign/cmd/stack"
	"github.com/countersign/countersign/executor/credential"
	"github.com/countersign/countersign/executor/pgtest"
	"github.com/countersign/countersign/sidecar/authn"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// twoMembers starts two production sidecars on one new PostgreSQL store,
// trusting the dev identity provider whose tokens it returns.
func twoMembers(t *testing.T) (a, b *stack.Stack, tokens map[string]string) {
	t.Helper()
	url := pgtest.URL(t)
	trusted, tokens := devIssuer(t)
	kek, err := credential.NewKeyEncryptionKey()
	if err != nil {
		t.Fatal(err)
	}
	member := func() *stack.Stack {
		o := production(t)
		o.Issuers = []authn.Issuer{trusted}
		o.StoreURL, o.KeyEncryptionKey = url, kek
		st, err := stack.Start(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	return member(), member(), tokens
}

// TestMembersBecomeReadyWithTheFirstBundle: two production sidecars join a
// new PostgreSQL store before any bundle is active, so neither is ready. A
// bundle activated through one makes the other ready too, with the same
// revision: a readiness probe never leaves a member out of the fleet for
// want of a bundle another member activated.
func TestMembersBecomeReadyWithTheFirstBundle(t *testing.T) {
	a, b, tokens := twoMembers(t)
	ready := func(st *stack.Stack) (int, string) {
		res, err := http.Get(st.URL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var body struct {
			Revision string `json:"policy_revision"`
		}
		_ = json.NewDecoder(res.Body).Decode(&body)
		return res.StatusCode, body.Revision
	}
	for name, st := range map[string]*stack.Stack{"a": a, "b": b} {
		if status, _ := ready(st); status != http.StatusServiceUnavailable {
			t.Fatalf("member %s before any bundle: /readyz %d, want 503", name, status)
		}
	}

	archive, err := bundles.Archive("p1")
	if err != nil {
		t.Fatal(err)
	}
	if status, code := uploadBundle(t, a.URL, tokens["ops-ida"], archive); status != http.StatusCreated {
		t.Fatalf("p1 through member a: %d %s, want 201", status, code)
	}
	if status, rev := ready(b); status != http.StatusOK || rev != "p1" {
		t.Fatalf("member b after p1 was activated through a: /readyz %d %q, want 200 p1", status, rev)
	}
}
