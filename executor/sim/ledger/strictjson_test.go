package ledger_test

import (
	"fmt"
	"testing"
)

// TestAmbiguousBodiesAreMalformed: a body that two JSON readers could read
// as different refunds (a name twice, or a name in another case that a
// case-insensitive reader would match) is refused as malformed before any
// token check or write, on every endpoint that reads a body.
func TestAmbiguousBodiesAreMalformed(t *testing.T) {
	e := start(t)
	for i, tc := range []struct {
		name, path, body string
	}{
		{"a refund with amount twice", "/refunds", `{"order":"O-1001","amount":3000,"amount":300000}`},
		{"a refund with order twice", "/refunds", `{"order":"O-1001","order":"O-1002","amount":3000}`},
		{"a refund with amount and AMOUNT", "/refunds", `{"order":"O-1001","amount":3000,"AMOUNT":300000}`},
		{"a refund with Amount for amount", "/refunds", `{"order":"O-1001","Amount":3000}`},
		{"a refund with ORDER for order", "/refunds", `{"ORDER":"O-1001","amount":3000}`},
		{"a refund with a duplicate inside an extra member", "/refunds", `{"order":"O-1001","amount":3000,"x":{"a":1,"a":2}}`},
		{"a reversal with Entry for entry", "/reversals", `{"Entry":"L1"}`},
		{"an external entry with By for by", "/_sim/external-entries", `{"order":"O-1001","amount":100,"By":"clerk"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A fresh token for each: the token is checked (and spent) first.
			r := e.must("POST", tc.path, e.refundToken("", "O-1001", 3000), fmt.Sprintf("k-amb-%d", i), tc.body)
			if r.status != 400 || r.code(t) != "malformed_json" {
				t.Fatalf("got %d %s, want 400 malformed_json", r.status, r.body)
			}
		})
	}
	if n := len(e.entries()); n != 0 {
		t.Fatalf("ambiguous bodies made %d entries", n)
	}
}
