package orders_test

import (
	"testing"

	"github.com/countersign/countersign/executor/sim/actorcheck"
)

// TestAmbiguousBodiesAreMalformed: a body with a name twice, or a name in
// another case than documented, is refused as malformed and changes nothing.
func TestAmbiguousBodiesAreMalformed(t *testing.T) {
	e := start(t)
	tok := e.token("reship", actorcheck.ToolReshipOrder, "O-1001")
	for _, tc := range []struct {
		name, path, token, body string
	}{
		{"a shipment body with a name twice", "/orders/O-1001/shipments", tok, `{"x":1,"x":2}`},
		{"an order with paid twice", "/_sim/orders", "", `{"id":"O-1008","region":"EU","customer":"c","paid":5000,"paid":1,"status":"shipped"}`},
		{"an order with Paid for paid", "/_sim/orders", "", `{"id":"O-1008","region":"EU","customer":"c","Paid":5000,"status":"shipped"}`},
		{"an order with id and ID", "/_sim/orders", "", `{"id":"O-1008","ID":"O-1009","region":"EU","customer":"c","paid":5000,"status":"shipped"}`},
		{"an external shipment with By for by", "/_sim/external-shipments", "", `{"order":"O-1001","By":"warehouse"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.must("POST", tc.path, tc.token, tc.body)
			if r.status != 400 || r.code(t) != "malformed_json" {
				t.Fatalf("got %d %s, want 400 malformed_json", r.status, r.body)
			}
		})
	}
	if n := len(e.shipments("O-1001")); n != 0 {
		t.Fatalf("ambiguous bodies made %d shipments", n)
	}
	if _, err := e.srv.Order("O-1008"); err == nil {
		t.Fatal("an ambiguous body added an order")
	}
}
