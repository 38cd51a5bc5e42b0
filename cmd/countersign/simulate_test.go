package main

import (
	"bytes"
	"encoding/json"
	"regexp"
	"testing"
)

// simulate runs countersign simulate with args and returns its stdout
// and stderr apart.
func simulate(t *testing.T, args ...string) (stdout, stderr string) {
	t.Helper()
	cmd := newRootCmd()
	var out, errs bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errs)
	cmd.SetArgs(append([]string{"simulate"}, args...))
	if err := cmd.ExecuteContext(t.Context()); err != nil {
		t.Fatalf("simulate %v: %v\n%s%s", args, err, out.String(), errs.String())
	}
	return out.String(), errs.String()
}

func TestSimulateSummarizesTheSeedsAsJSON(t *testing.T) {
	out, _ := simulate(t, "--seeds", "3", "--seed", "11", "--json")
	var sum struct {
		Seeds      int               `json:"seeds"`
		First      uint64            `json:"first_seed"`
		Violations *int              `json:"violations"`
		Failed     []json.RawMessage `json:"failed"`
		Took       int64             `json:"took_ns"`
		PerSec     float64           `json:"seeds_per_second"`
		Results    []struct {
			Seed       uint64            `json:"seed"`
			TraceHash  string            `json:"trace_hash"`
			Lines      int               `json:"lines"`
			Restarts   int               `json:"restarts"`
			Violations []json.RawMessage `json:"violations"`
			Replay     string            `json:"replay"`
		} `json:"results"`
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(out)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sum); err != nil {
		t.Fatalf("decode %s: %v", out, err)
	}
	if sum.Seeds != 3 || sum.First != 11 || sum.Violations == nil || *sum.Violations != 0 || sum.Failed == nil || len(sum.Failed) != 0 ||
		sum.Took <= 0 || sum.PerSec <= 0 {
		t.Errorf("summary %+v, want 3 seeds from 11, no violation, none failed, a time and a rate", sum)
	}
	hash := regexp.MustCompile(`^[0-9a-f]{16}$`)
	for i, r := range sum.Results {
		if r.Seed != 11+uint64(i) || !hash.MatchString(r.TraceHash) || r.Lines == 0 {
			t.Errorf("result %d: %+v, want seed %d with its trace hash", i, r, 11+i)
		}
	}
	if len(sum.Results) != 3 {
		t.Errorf("%d results, want one per seed", len(sum.Results))
	}
}

func TestSimulateReplaysASeedWithTheSameTrace(t *testing.T) {
	hash := regexp.MustCompile(`seed 11: trace ([0-9a-f]{16}), `)
	var got []string
	for range 2 {
		out, errs := simulate(t, "--seed", "11", "--trace")
		m := hash.FindStringSubmatch(errs)
		if m == nil {
			t.Fatalf("no trace hash for seed 11 in:\n%s", errs)
		}
		if !regexp.MustCompile(`(?m)^ +0 seed 11: 6 orders, network faults`).MatchString(out) {
			t.Fatalf("no trace printed for seed 11:\n%s", out)
		}
		got = append(got, m[1])
	}
	if got[0] != got[1] {
		t.Errorf("seed 11 traced %s, then %s", got[0], got[1])
	}
}
