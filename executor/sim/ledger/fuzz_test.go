package ledger

import (
	"errors"
	"fmt"
	"testing"

	"github.com/countersign/countersign/executor/sim/simhttp"
)

// FuzzRefundRequest covers the decoding of POST /refunds: the body and the
// Idempotency-Key header. Whatever it accepts is a well-formed refund whose
// canonical form decodes to the same request; whatever it refuses is a
// client error with a stable code. Its seed corpus runs with go test; run
// longer with -fuzz FuzzRefundRequest.
func FuzzRefundRequest(f *testing.F) {
	for _, s := range []struct{ body, key string }{
		{`{"order":"O-1001","amount":3000}`, "W1/1"},
		{`{"amount":3000,"order":"O-1001"}`, ""},
		{` {"order":"O-1001","amount":3000} `, "k"},
		{`{"order":"O-1001","amount":3000,"approved_by":"lead-dee"}`, "k"},
		{`{"order":"O-1001","amount":3000,"amount":1}`, ""},
		{`{"order":"O-1001","amount":30.5}`, ""},
		{`{"order":"O-1001","amount":-1}`, ""},
		{`{"order":"O-1001","amount":1e3}`, ""},
		{`{"order":"O-1001","amount":"3000"}`, ""},
		{`{"order":"O-1001","amount":9223372036854775808}`, ""},
		{`{"order":"O-1001\u0000","amount":1}`, ""},
		{`{"order":"O-1001","amount":3000}{}`, ""},
		{`[]`, ""},
		{``, ""},
		{`null`, ""},
		{`{"order":"O-1001","amount":3000}`, "a\x00b"},
	} {
		f.Add([]byte(s.body), s.key)
	}
	f.Fuzz(func(t *testing.T, body []byte, key string) {
		var keys []string
		if key != "" {
			keys = []string{key}
		}
		q, err := decodeRefund(body, keys)
		if err != nil {
			var e *simhttp.Error
			if !errors.As(err, &e) || (e.Status != 400 && e.Status != 422) || e.Code == "" {
				t.Fatalf("refusal %v is not a 400/422 with a code", err)
			}
			return
		}
		if !orderID.MatchString(q.Order) || q.Amount <= 0 || q.Key != key {
			t.Fatalf("accepted a bad request %+v from %q", q, body)
		}
		canonical := fmt.Appendf(nil, `{"amount":%d,"order":%q}`, q.Amount, q.Order)
		again, err := decodeRefund(canonical, keys)
		if err != nil || again != q || again.fingerprint() != q.fingerprint() || again.call() != q.call() {
			t.Fatalf("canonical form %s decodes to %+v, %v; want %+v", canonical, again, err, q)
		}
	})
}
