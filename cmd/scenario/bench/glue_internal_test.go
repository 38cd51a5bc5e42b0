package bench

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestGlueLooksTheOrderUpForEachCall puts a counting proxy in front of the
// order system and runs a glue cell: the order system sees one GET
// /orders/{id} for every step the glue attempted, and every step is done.
func TestGlueLooksTheOrderUpForEachCall(t *testing.T) {
	ctx := context.Background()
	o := Options{Agents: []int{2}, Duration: 300 * time.Millisecond, Baseline: true, DataDir: t.TempDir()}.withDefaults()
	tg, cleanup, err := openTarget(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cleanup(); err != nil {
			t.Error(err)
		}
	})
	backend, err := url.Parse(tg.orders)
	if err != nil {
		t.Fatal(err)
	}
	var lookups atomic.Int64
	forward := httputil.NewSingleHostReverseProxy(backend)
	counting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/orders/") {
			lookups.Add(1)
		}
		forward.ServeHTTP(w, r)
	}))
	t.Cleanup(counting.Close)
	tg.orders = counting.URL
	g, err := startGlue(ctx, tg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.close)
	row, err := runCell(ctx, o, tg, 2, g)
	if err != nil {
		t.Fatal(err)
	}
	if row.Done == 0 || row.Other != 0 {
		t.Errorf("done %d, other %d (%v): want every glue step done", row.Done, row.Other, row.Outcomes)
	}
	if got := lookups.Load(); got != int64(row.Requests) {
		t.Errorf("the order system saw %d lookups for %d glue steps, want one each", got, row.Requests)
	}
}
