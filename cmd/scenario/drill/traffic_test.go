package drill

import (
	"math"
	"testing"
	"time"
)

// The traffic of many seeds has the scenario's shape: a ticket every 90 s
// on average, 70/22/8% refund classes within their bounds, a third with a
// reshipment, orders paid at least the refund, in the rep's region.
func TestTrafficShape(t *testing.T) {
	var n, small, mid, high, reship int
	var span time.Duration
	for seed := uint64(1); seed <= 200; seed++ {
		ts := tickets(seed)
		for i, tk := range ts {
			if i > 0 && tk.At < ts[i-1].At {
				t.Fatalf("seed %d: ticket %s arrives before the one before it", seed, tk.ID)
			}
			if tk.Paid < tk.Amount {
				t.Errorf("seed %d %s: paid %s, less than the refund %s", seed, tk.ID, tk.Paid, tk.Amount)
			}
			if (tk.Rep == "rep-ana") != (tk.Region == "EU") {
				t.Errorf("seed %d %s: %s on an order of %s", seed, tk.ID, tk.Rep, tk.Region)
			}
			switch d := tk.Amount / 100; tk.Class {
			case classSmall:
				small++
				if d < 5 || d > 49 {
					t.Errorf("%s: $%d is not under $50", tk.ID, d)
				}
			case classMid:
				mid++
				if d < 51 || d > 500 {
					t.Errorf("%s: $%d is not in $51-$500", tk.ID, d)
				}
			case classHigh:
				high++
				if d < 501 {
					t.Errorf("%s: $%d is not above $500", tk.ID, d)
				}
			}
			if tk.Reship {
				reship++
			}
		}
		n += len(ts)
		span += duration
	}
	near := func(name string, got, want, tol float64) {
		if math.Abs(got-want) > tol {
			t.Errorf("%s: %.3f, want %.3f ± %.3f", name, got, want, tol)
		}
	}
	f := float64(n)
	near("mean gap (s)", span.Seconds()/f, 90, 2)
	near("under $50", float64(small)/f, 0.70, 0.02)
	near("$51-$500", float64(mid)/f, 0.22, 0.02)
	near("above $500", float64(high)/f, 0.08, 0.01)
	near("reshipment", float64(reship)/f, 1.0/3, 0.02)
}

func TestTrafficDependsOnlyOnTheSeed(t *testing.T) {
	a, b := tickets(7), tickets(7)
	if len(a) != len(b) {
		t.Fatalf("%d and %d tickets", len(a), len(b))
	}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("ticket %d differs: %+v, %+v", i, a[i], b[i])
		}
	}
}

// The 95% upper bound (1 - 0.05^(1/n)) on the rate of an unapproved refund
// after 34, 300 and 1000 clean approval-gated ones, and the edges: one
// trial, none.
func TestUpperBound(t *testing.T) {
	for _, c := range []struct {
		n    int
		want float64
	}{{34, 0.0843}, {300, 0.0099}, {1000, 0.0030}, {1, 0.95}, {0, 1}} {
		if got := upperBound(c.n); got != c.want {
			t.Errorf("upperBound(%d) = %v, want %v", c.n, got, c.want)
		}
	}
}

// Events on the same instant run operator first, then the monitor, the
// leads and the tickets in their order.
func TestQueueOrder(t *testing.T) {
	var q queue
	for _, e := range []event{
		{at: time.Minute, kind: evTicket, ticket: 2},
		{at: time.Minute, kind: evLeads},
		{at: 0, kind: evTicket, ticket: 1},
		{at: time.Minute, kind: evTicket, ticket: 1},
		{at: time.Minute, kind: evRelease},
		{at: time.Minute, kind: evMonitor},
	} {
		q.push(e)
	}
	want := []event{
		{at: 0, kind: evTicket, ticket: 1},
		{at: time.Minute, kind: evRelease},
		{at: time.Minute, kind: evMonitor},
		{at: time.Minute, kind: evLeads},
		{at: time.Minute, kind: evTicket, ticket: 1},
		{at: time.Minute, kind: evTicket, ticket: 2},
	}
	for i, w := range want {
		if got := q.pop(); got != w {
			t.Errorf("event %d: %+v, want %+v", i, got, w)
		}
	}
}
