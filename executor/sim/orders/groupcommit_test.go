package orders_test

import (
	"testing"

	"github.com/countersign/countersign/executor/sim/actorcheck"
)

func (e *env) commits() uint64 {
	e.t.Helper()
	n, err := e.srv.Commits()
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// TestTokenRequestCostsOneCommit: a reshipment records its token's jti in
// the transaction that records the shipment (it cost two commits before);
// a lookup, which writes nothing else, records the jti in one commit
// before it answers, found or not.
func TestTokenRequestCostsOneCommit(t *testing.T) {
	e := start(t)
	for _, tc := range []struct {
		name, method, path, token, body string
		status                          int
	}{
		{"a reshipment", "POST", "/orders/O-1001/shipments", e.reshipToken("O-1001", "cs-w1"), refBody("cs-w1"), 201},
		{"a reshipment of a missing order", "POST", "/orders/O-9/shipments", e.reshipToken("O-9", "cs-w2"), refBody("cs-w2"), 404},
		{"a lookup", "GET", "/orders/O-1001", e.token("lookup", "lookup_order", "O-1001"), "", 200},
		{"a lookup of a missing order", "GET", "/orders/O-9", e.token("lookup", "lookup_order", "O-9"), "", 404},
	} {
		before := e.commits()
		if r := e.must(tc.method, tc.path, tc.token, tc.body); r.status != tc.status {
			t.Fatalf("%s: %d %s, want %d", tc.name, r.status, r.body, tc.status)
		}
		if n := e.commits() - before; n != 1 {
			t.Errorf("%s cost %d commits, want 1", tc.name, n)
		}
	}
}

// TestLookupTokenReplayed: a lookup token is single-use too, before and
// after a restart (its jti was committed before the first answer), and a
// used one is refused before the request is looked at.
func TestLookupTokenReplayed(t *testing.T) {
	e := start(t)
	used := e.token("lookup", "lookup_order", "O-1001")
	if r := e.must("GET", "/orders/O-1001", used, ""); r.status != 200 {
		t.Fatalf("first use: %d %s", r.status, r.body)
	}
	for _, tc := range []struct {
		name, path string
		restart    bool
	}{
		{"again", "/orders/O-1001", false},
		{"for another order", "/orders/O-1002", false},
		{"for a missing order", "/orders/O-9", false},
		{"after a restart", "/orders/O-1001", true},
	} {
		if tc.restart {
			if err := e.srv.Close(); err != nil {
				t.Fatal(err)
			}
			e.serve(seed)
		}
		if r := e.must("GET", tc.path, used, ""); r.status != 401 || r.code(t) != actorcheck.CodeTokenReplayed {
			t.Errorf("%s: %d %s, want 401 token_replayed", tc.name, r.status, r.body)
		}
	}
}
