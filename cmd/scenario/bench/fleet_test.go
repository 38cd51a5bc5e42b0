package bench_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/cmd/scenario/bench"
	"github.com/countersign/countersign/executor/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestBenchOnPostgresWithOneAndTwoSidecars runs a short bench on a real
// PostgreSQL, behind the bench's proxy with a round trip added, with one
// and then two in-process sidecars on it and checks the report's
// invariants: every answer accounted for, the agents spread over both
// sidecars, commits summed, retries counted, fsyncs reported as not
// applicable, round trips and statements per call counted. It asserts
// nothing about speed.
func TestBenchOnPostgresWithOneAndTwoSidecars(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL and three sidecars")
	}
	r, err := bench.Run(context.Background(), bench.Options{
		Store: pgtest.URL(t), Sidecars: []int{1, 2}, Agents: []int{2}, Duration: 300 * time.Millisecond, DataDir: t.TempDir(),
		StoreLatency: 2 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Rows) != 2 {
		t.Fatalf("rows = %d, want one per sidecar count: %+v", len(r.Rows), r.Rows)
	}
	for i, row := range r.Rows {
		if row.System != "countersign" || row.Sidecars != i+1 || row.Agents != 2 {
			t.Errorf("row %d is %s with %d sidecars and %d agents, want countersign with %d and 2", i, row.System, row.Sidecars, row.Agents, i+1)
		}
		if row.Done == 0 || row.Other != 0 || row.Done+row.Other != row.Requests {
			t.Errorf("row %d: done %d, other %d (%v), requests %d", i, row.Done, row.Other, row.Outcomes, row.Requests)
		}
		if row.CommitsPerStep == nil || *row.CommitsPerStep <= 0 || row.Commits["sidecar stores"] == 0 {
			t.Errorf("row %d: commits %v per step %v, want the sidecars' commits counted", i, row.Commits, row.CommitsPerStep)
		}
		if row.FsyncsPerStep != nil {
			t.Errorf("row %d: fsyncs per step %v on PostgreSQL, want none (not applicable)", i, *row.FsyncsPerStep)
		}
		if row.Retries == nil {
			t.Errorf("row %d: no retry count on PostgreSQL", i)
		}
		// A governed call makes at least one round trip, and every
		// round trip after a connection opens carries a statement.
		if trips, stmts := row.RoundTripsPerCall, row.StatementsPerCall; trips == nil || stmts == nil || *trips < 1 || *stmts < 1 {
			t.Errorf("row %d: round trips per call %v, statements per call %v, want both counted and at least 1", i, trips, stmts)
		}
	}
	if ms := r.Params.StoreLatencyMS; ms == nil || *ms != 2 {
		t.Errorf("params: store latency %v ms, want 2", ms)
	}
	two := r.Rows[1]
	if len(two.DoneBySidecar) != 2 || two.DoneBySidecar[0] == 0 || two.DoneBySidecar[1] == 0 ||
		two.DoneBySidecar[0]+two.DoneBySidecar[1] != two.Done {
		t.Errorf("two sidecars: done by sidecar %v of %d, want both to have done steps", two.DoneBySidecar, two.Done)
	}
	var text bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| countersign, 1 sidecar, 2 agents |", "| countersign, 2 sidecars, 2 agents |", "| n/a |",
		"fsyncs: not applicable", "sidecar store retries",
		"store round trips/call", "a 2ms round trip (1ms each way)"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the text lacks %q:\n%s", want, text.String())
		}
	}
}
