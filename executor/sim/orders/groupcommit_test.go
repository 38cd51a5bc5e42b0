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

// TestTokenRequestCommits: a reshipment records its token's jti in the
// transaction that records the shipment (it cost two commits before); a
// lookup, which moves nothing, commits nothing, found or not: its jti is
// held in memory (it cost a commit before).
func TestTokenRequestCommits(t *testing.T) {
	e := start(t)
	for _, tc := range []struct {
		name, method, path, token, body string
		status                          int
		commits                         uint64
	}{
		{"a reshipment", "POST", "/orders/O-1001/shipments", e.reshipToken("O-1001", "cs-w1"), refBody("cs-w1"), 201, 1},
		{"a reshipment of a missing order", "POST", "/orders/O-9/shipments", e.reshipToken("O-9", "cs-w2"), refBody("cs-w2"), 404, 1},
		{"a lookup", "GET", "/orders/O-1001", e.token("lookup", "lookup_order", "O-1001"), "", 200, 0},
		{"a lookup of a missing order", "GET", "/orders/O-9", e.token("lookup", "lookup_order", "O-9"), "", 404, 0},
		{"a lookup refused for another order", "GET", "/orders/O-1002", e.token("lookup", "lookup_order", "O-1001"), "", 403, 0},
	} {
		before := e.commits()
		if r := e.must(tc.method, tc.path, tc.token, tc.body); r.status != tc.status {
			t.Fatalf("%s: %d %s, want %d", tc.name, r.status, r.body, tc.status)
		}
		if n := e.commits() - before; n != tc.commits {
			t.Errorf("%s cost %d commits, want %d", tc.name, n, tc.commits)
		}
	}
}

// TestLookupTokenReplayed: a lookup token is single-use too, from memory
// for its lifetime, and a used one is refused before the request is
// looked at, at a lookup or at a write. A restart forgets it: the replay
// then reads the same order again, as its first use did, and moves
// nothing (actorcheck's doc, "Single use").
func TestLookupTokenReplayed(t *testing.T) {
	e := start(t)
	used := e.token("lookup", "lookup_order", "O-1001")
	first := e.must("GET", "/orders/O-1001", used, "")
	if first.status != 200 {
		t.Fatalf("first use: %d %s", first.status, first.body)
	}
	for _, tc := range []struct {
		name, method, path, body string
	}{
		{"again", "GET", "/orders/O-1001", ""},
		{"for another order", "GET", "/orders/O-1002", ""},
		{"for a missing order", "GET", "/orders/O-9", ""},
		{"at a reshipment", "POST", "/orders/O-1001/shipments", refBody("cs-w9")},
	} {
		if r := e.must(tc.method, tc.path, used, tc.body); r.status != 401 || r.code(t) != actorcheck.CodeTokenReplayed {
			t.Errorf("%s: %d %s, want 401 token_replayed", tc.name, r.status, r.body)
		}
	}
	if err := e.srv.Close(); err != nil {
		t.Fatal(err)
	}
	e.serve(seed)
	before := e.commits()
	if r := e.must("GET", "/orders/O-1001", used, ""); r.status != 200 || string(r.body) != string(first.body) {
		t.Errorf("after a restart: %d %s, want the first answer again: %s", r.status, r.body, first.body)
	}
	if n := e.commits() - before; n != 0 {
		t.Errorf("the replay after a restart cost %d commits, want none", n)
	}
}
