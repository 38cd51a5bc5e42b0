package bench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/cmd/devstack"
	"github.com/countersign/countersign/cmd/scenario/bench"
)

// TestTinyBenchAccountsForEveryAnswer runs a bench of 1 and 2 agents with
// the baseline on the in-process stack and checks the report's invariants;
// it asserts nothing about speed.
func TestTinyBenchAccountsForEveryAnswer(t *testing.T) {
	r, err := bench.Run(context.Background(), bench.Options{
		Agents: []int{1, 2}, Duration: 300 * time.Millisecond, Baseline: true, DataDir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Rows) != 4 {
		t.Fatalf("rows = %d, want 4 (countersign and glue, 1 and 2 agents): %+v", len(r.Rows), r.Rows)
	}
	for i, row := range r.Rows {
		wantSystem := map[bool]string{true: "countersign", false: "glue"}[i < 2]
		if row.System != wantSystem || row.Agents != []int{1, 2}[i%2] {
			t.Errorf("row %d is %s with %d agents, want %s with %d", i, row.System, row.Agents, wantSystem, []int{1, 2}[i%2])
		}
		checkRow(t, row)
	}
	if len(r.Ratios) != 2 {
		t.Errorf("ratios = %+v, want one per agent count", r.Ratios)
	}
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(r); err != nil {
		t.Fatal(err)
	}
	var back bench.Report
	dec := json.NewDecoder(&buf)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&back); err != nil {
		t.Fatalf("the JSON does not decode into bench.Report: %v", err)
	}
	if len(back.Rows) != 4 || back.Rows[0].Done != r.Rows[0].Done {
		t.Errorf("the JSON lost figures: %+v", back.Rows)
	}
	var text bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| countersign, 1 agent |", "| glue, 2 agents |", "ratio countersign/glue, 1 agent", "GOMAXPROCS",
		"GET /orders/{id}"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the text lacks %q:\n%s", want, text.String())
		}
	}
}

func checkRow(t *testing.T, row bench.Row) {
	t.Helper()
	name := fmt.Sprintf("%s, %d agents", row.System, row.Agents)
	sum := row.Done
	for _, n := range row.Outcomes {
		sum += n
	}
	switch {
	case row.Done == 0:
		t.Errorf("%s: nothing done: %+v", name, row.Outcomes)
	case row.Done+row.Other != row.Requests || sum != row.Requests:
		t.Errorf("%s: done %d + other %d (outcomes %v) != requests %d", name, row.Done, row.Other, row.Outcomes, row.Requests)
	case row.Other != 0:
		t.Errorf("%s: steps not done (every refund should be allowed): %v", name, row.Outcomes)
	case row.Propose.P50 <= 0 || row.Propose.P50 > row.Propose.P99:
		t.Errorf("%s: propose p50 %v, p99 %v", name, row.Propose.P50, row.Propose.P99)
	case row.CommitsPerStep == nil || *row.CommitsPerStep <= 0:
		t.Errorf("%s: commits per step %v, want > 0", name, row.CommitsPerStep)
	case *row.FsyncsPerStep != 2**row.CommitsPerStep:
		t.Errorf("%s: fsyncs per step %v, want twice %v", name, *row.FsyncsPerStep, *row.CommitsPerStep)
	case row.CPUSecondsPer1000Step == nil || *row.CPUSecondsPer1000Step <= 0:
		t.Errorf("%s: CPU seconds per 1,000 steps %v", name, row.CPUSecondsPer1000Step)
	}
	if row.Sidecars == 0 && (row.RoundTripsPerCall != nil || row.StatementsPerCall != nil) {
		t.Errorf("%s: store round trips %v and statements %v on bbolt, want none", name, row.RoundTripsPerCall, row.StatementsPerCall)
	}
	if cp := row.CreatePropose; row.System == "countersign" && (cp == nil || cp.P50 > cp.P99 || cp.P50 < row.Propose.P50) {
		t.Errorf("%s: create+propose %+v beside propose %+v", name, cp, row.Propose)
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	cases := []struct {
		name string
		o    bench.Options
		want []error
	}{
		{"the defaults are valid", bench.Options{}, nil},
		{"an agent count of zero is refused", bench.Options{Agents: []int{0}}, []error{bench.ErrOptions}},
		{"a sidecar elsewhere is refused", bench.Options{Sidecar: "http://10.0.0.1:8080", DataDir: "d"}, []error{bench.ErrNotLoopback}},
		{"sidecar counts without a store are refused", bench.Options{Sidecars: []int{2}}, []error{bench.ErrOptions}},
		{"a store that is not a postgres URL, with the baseline and a sidecar count of zero, is refused",
			bench.Options{Store: "mysql://x", Baseline: true, Sidecars: []int{0}}, []error{bench.ErrOptions}},
		{"a store latency without a store is refused", bench.Options{StoreLatency: time.Millisecond}, []error{bench.ErrOptions}},
		{"a negative store latency is refused", bench.Options{Store: "postgres://h/db", StoreLatency: -time.Millisecond}, []error{bench.ErrOptions}},
		{"a store latency over the bound is refused",
			bench.Options{Store: "postgres://h/db", StoreLatency: bench.MaxStoreLatency + time.Millisecond}, []error{bench.ErrOptions}},
		{"a store latency of the bound with a store is valid", bench.Options{Store: "postgres://h/db", StoreLatency: bench.MaxStoreLatency}, nil},
		{"a sidecar without its data directory, with the baseline, is refused twice",
			bench.Options{Sidecar: "http://127.0.0.1:8080", Baseline: true}, []error{bench.ErrOptions, bench.ErrBaselineOutOfProcess}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.o.Validate()
			if (err == nil) != (len(c.want) == 0) {
				t.Fatalf("Validate() = %v, want %v", err, c.want)
			}
			for _, w := range c.want {
				if !errors.Is(err, w) {
					t.Errorf("Validate() = %v, want it to wrap %v", err, w)
				}
			}
		})
	}
}

// TestBenchDrivesARunningSidecar: with Sidecar the bench reads the tokens
// and endpoints a dev sidecar wrote, drives it over HTTP, and reports what
// it cannot see from outside as unknown rather than as zero.
func TestBenchDrivesARunningSidecar(t *testing.T) {
	dir := t.TempDir()
	st, err := devstack.Start(context.Background(), devstack.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	r, err := bench.Run(context.Background(), bench.Options{
		Agents: []int{2}, Duration: 200 * time.Millisecond, Sidecar: st.URL, DataDir: dir,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Rows) != 1 {
		t.Fatalf("rows = %+v, want one", r.Rows)
	}
	row := r.Rows[0]
	if row.Done == 0 || row.Other != 0 || row.Done+row.Other != row.Requests {
		t.Errorf("done %d, other %d (%v), requests %d", row.Done, row.Other, row.Outcomes, row.Requests)
	}
	if row.CommitsPerStep != nil || row.FsyncsPerStep != nil || row.CPUSecondsPer1000Step != nil || row.Commits != nil {
		t.Errorf("out of process the commits, fsyncs and CPU are unknown, got %+v", row)
	}
	var text bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "| unknown | unknown | unknown |") {
		t.Errorf("the table does not say unknown:\n%s", text.String())
	}
}

// Both ways of sending a step run to done, and the report says which one
// the cell timed.
func TestBenchSendsOneRequestOrTwo(t *testing.T) {
	for _, two := range []bool{false, true} {
		r, err := bench.Run(context.Background(), bench.Options{
			Agents: []int{1}, Duration: 200 * time.Millisecond, TwoRequests: two, DataDir: t.TempDir(),
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Rows) != 1 {
			t.Fatalf("two requests %v: rows %+v, want one", two, r.Rows)
		}
		checkRow(t, r.Rows[0])
		want := map[bool]string{false: "one request", true: "two requests"}[two]
		if !strings.Contains(r.Params.Workload, want) {
			t.Errorf("two requests %v: the workload %q does not say %q", two, r.Params.Workload, want)
		}
	}
}
