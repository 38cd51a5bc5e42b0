package actorcheck_test

import (
	"context"
	"testing"
	"time"

	"github.com/countersign/countersign/executor/sim/actorcheck"
	"github.com/countersign/countersign/executor/simclock"
)

// BenchmarkCheck is the receiver's whole check of one refund token:
// header and payload decoding, key lookup, EdDSA verification and the
// authorization against the request.
func BenchmarkCheck(b *testing.B) {
	iss := newIssuer(b)
	call := actorcheck.RefundCall("O-1001", 3000)
	header := "Bearer " + iss.Mint(b, "rep-ana", "ledger", "refund", 50000, call)
	want := actorcheck.Want{Audience: "ledger", Scope: "refund", Call: call, Amount: 3000}
	clock := simclock.New(t0.Add(time.Second))
	for _, c := range []struct {
		name string
		o    actorcheck.Options
	}{
		{"static-keys", actorcheck.Options{Keys: iss.PublicSet(b), Clock: clock, AllowReplay: true}},
		{"jwks-max-age=1s", actorcheck.Options{JWKSURL: iss.JWKSURL(), MaxAge: time.Second, Clock: clock, AllowReplay: true}},
	} {
		b.Run(c.name, func(b *testing.B) {
			v, err := actorcheck.New(c.o)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.Check(context.Background(), header, want); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
