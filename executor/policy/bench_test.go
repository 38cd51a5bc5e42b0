package policy_test

import (
	"context"
	"testing"

	"github.com/countersign/countersign/executor/policy"
)

// BenchmarkDecide measures one decision on p1: a $30 refund that passes
// every check, the longest path through the rule list.
func BenchmarkDecide(b *testing.B) {
	e := policy.New(policy.Options{})
	e.Restore(embedded(b, "p1"))
	in := refund(repAna, "O-1001", 3000)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		r, err := e.Decide(ctx, in)
		if err != nil || r.Decision != policy.Allow {
			b.Fatal(r, err)
		}
	}
}
