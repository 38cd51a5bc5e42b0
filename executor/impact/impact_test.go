package impact_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/bundles"
	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/impact"
	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

// refundInput is rep-ana's refund of amount on an EU order paid $900.00,
// with nothing spent yet.
func refundInput(amount money.Cents) policy.Input {
	return policy.Input{
		User: &policy.User{ID: "rep-ana", Role: "rep", Region: "EU", Scopes: []string{"lookup", "refund", "reship"}, RefundCeiling: 50000},
		Tool: tool.IssueRefund, Args: tool.Args{Order: "O-1001", Amount: amount},
		Order: &policy.Order{ID: "O-1001", Region: "EU", Customer: "customer-1", Paid: 90000, Status: "shipped"},
	}
}

// decided is the decision log p3 would have written for a refund of each
// amount, one workflow step each (W-<amount>/1), as the engine logs them.
func decided(t *testing.T, amounts ...money.Cents) []store.Decision {
	t.Helper()
	src, err := bundles.Open("p3")
	if err != nil {
		t.Fatal(err)
	}
	b, err := policy.LoadFS(src)
	if err != nil {
		t.Fatal(err)
	}
	p3 := policy.New(policy.Options{Timeout: 5 * time.Second})
	if err := p3.Restore(b); err != nil {
		t.Fatal(err)
	}
	var out []store.Decision
	for i, a := range amounts {
		in := refundInput(a)
		res, err := p3.Decide(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := engine.MarshalInput(in)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, store.Decision{Seq: uint64(i + 1), ID: fmt.Sprintf("d-%d", a), Path: engine.DecisionPath, Input: raw,
			Workflow: fmt.Sprintf("W-%d", a), N: 1, User: "rep-ana", Tool: tool.IssueRefund, Args: in.Args,
			Decision: string(res.Decision), Rule: res.Rule, Revision: "p3"})
	}
	return out
}

// variant is embedded bundle base as revision with the limits named in
// limits (name: cents) changed in its data.json.
func variant(t *testing.T, base, revision string, limits map[string]int) *policy.Bundle {
	t.Helper()
	src, err := bundles.Open(base)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := fs.ReadFile(src, "data.json")
	if err != nil {
		t.Fatal(err)
	}
	var data struct {
		Countersign struct {
			Limits map[string]int `json:"limits"`
		} `json:"countersign"`
	}
	if err := json.Unmarshal(raw, &data); err != nil {
		t.Fatal(err)
	}
	maps.Copy(data.Countersign.Limits, limits)
	if raw, err = json.Marshal(data); err != nil {
		t.Fatal(err)
	}
	fsys, err := bundles.Variant(base, revision, func(s string) string { return s }, map[string]string{"data.json": string(raw)})
	if err != nil {
		t.Fatal(err)
	}
	b, err := policy.LoadFS(fsys)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// amounts are the amounts of a change's examples, each checked against the
// decision it names (decided's ids, workflows and steps).
func amounts(t *testing.T, c impact.Change) []money.Cents {
	t.Helper()
	var out []money.Cents
	for _, e := range c.Examples {
		if e.DecisionID != fmt.Sprintf("d-%d", e.Amount) || e.Workflow != fmt.Sprintf("W-%d", e.Amount) || e.N != 1 || e.Order != "O-1001" {
			t.Errorf("example %+v does not name its decision", e)
		}
		out = append(out, e.Amount)
	}
	return out
}

// Decisions made under p3 (auto limit $50.00), replayed against variants:
// raising the auto limit to $75.00 turns the approvals between the two
// limits into ALLOWs; lowering the maximum to $400.00 as well turns the
// approvals above it into DENYs. Everything else decides as it did.
func TestReplay(t *testing.T) {
	log := decided(t, 3000, 5000, 5001, 6000, 7000, 7500, 7501, 20000, 45000, 48000, 60000)
	if got := log[2].Decision + " " + log[2].Rule; got != "REQUIRE_APPROVAL R7-refund-needs-approval" {
		t.Fatalf("p3 decided $50.01 %s", got)
	}
	toAllow := impact.Change{From: policy.RequireApproval, To: policy.Allow, Rule: "default-allow-after-checks", Count: 4, Amount: 5001 + 6000 + 7000 + 7500}
	toDeny := impact.Change{From: policy.RequireApproval, To: policy.Deny, Rule: "R3-refund-over-ceiling", Count: 2, Amount: 45000 + 48000}
	for _, tc := range []struct {
		name     string
		limits   map[string]int
		log      []store.Decision
		changed  []impact.Change
		examples [][]money.Cents
	}{
		{"the same limits change nothing", map[string]int{}, log, []impact.Change{}, nil},
		{"a higher auto limit allows the amounts in between", map[string]int{"refund_auto": 7500}, log,
			[]impact.Change{toAllow}, [][]money.Cents{{5001, 6000, 7000}}},
		{"two changes, the larger first", map[string]int{"refund_auto": 7500, "refund_max": 40000}, log,
			[]impact.Change{toAllow, toDeny}, [][]money.Cents{{5001, 6000, 7000}, {45000, 48000}}},
		{"equal counts in order of from, to and rule", map[string]int{"refund_auto": 7500, "refund_max": 40000}, decided(t, 6000, 45000, 7000, 48000),
			[]impact.Change{{From: policy.RequireApproval, To: policy.Allow, Rule: "default-allow-after-checks", Count: 2, Amount: 13000},
				{From: policy.RequireApproval, To: policy.Deny, Rule: "R3-refund-over-ceiling", Count: 2, Amount: 93000}},
			[][]money.Cents{{6000, 7000}, {45000, 48000}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := impact.Replay(context.Background(), variant(t, "p3", "p4", tc.limits), tc.log)
			if err != nil {
				t.Fatal(err)
			}
			if r.Replayed != len(tc.log) || r.Skipped != 0 {
				t.Errorf("replayed %d skipped %d, want %d and 0", r.Replayed, r.Skipped, len(tc.log))
			}
			var total money.Cents
			for _, c := range tc.changed {
				total += c.Amount
			}
			if r.ChangedAmount != total || len(r.RuleChanged) != 0 {
				t.Errorf("changed amount %s, rule changes %+v; want %s and none (only limits changed)", r.ChangedAmount, r.RuleChanged, total)
			}
			var got [][]money.Cents
			for i := range r.Changed {
				got = append(got, amounts(t, r.Changed[i]))
				r.Changed[i].Examples = nil
			}
			if !reflect.DeepEqual(r.Changed, tc.changed) || !reflect.DeepEqual(got, tc.examples) {
				t.Errorf("changed %+v with examples %v\nwant    %+v with examples %v", r.Changed, got, tc.changed, tc.examples)
			}
		})
	}
}

// A candidate that asks for the same approvals by another rule (R7
// renamed R13) changes no outcome and no money, and each of those
// decisions is reported apart, with the rule recorded and the candidate's;
// with the auto limit raised too, the amounts between the limits flip and
// the rest keep their outcome by the new rule.
func TestReplayReportsRuleChangesThatKeepTheOutcome(t *testing.T) {
	log := decided(t, 3000, 5001, 6000, 7000, 60000)
	renamed := func(t *testing.T, limits map[string]int) *policy.Bundle {
		t.Helper()
		data := map[string]string{}
		if limits != nil {
			data["data.json"] = string(variant(t, "p3", "p4", limits).Data())
		}
		fsys, err := bundles.Variant("p3", "p4", func(s string) string {
			return strings.ReplaceAll(s, "R7-refund-needs-approval", "R13-refund-needs-approval")
		}, data)
		if err != nil {
			t.Fatal(err)
		}
		b, err := policy.LoadFS(fsys)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, tc := range []struct {
		name        string
		candidate   *policy.Bundle
		changed     []impact.Change
		ruleChanged []impact.RuleChange
		total       money.Cents
	}{
		{"the rule renamed", renamed(t, nil), []impact.Change{},
			[]impact.RuleChange{{Decision: policy.RequireApproval, FromRule: "R7-refund-needs-approval", ToRule: "R13-refund-needs-approval",
				Count: 3, Amount: 5001 + 6000 + 7000}}, 0},
		{"the rule renamed and the auto limit raised", renamed(t, map[string]int{"refund_auto": 6500}),
			[]impact.Change{{From: policy.RequireApproval, To: policy.Allow, Rule: "default-allow-after-checks", Count: 2, Amount: 5001 + 6000}},
			[]impact.RuleChange{{Decision: policy.RequireApproval, FromRule: "R7-refund-needs-approval", ToRule: "R13-refund-needs-approval",
				Count: 1, Amount: 7000}}, 5001 + 6000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := impact.Replay(context.Background(), tc.candidate, log)
			if err != nil {
				t.Fatal(err)
			}
			for i := range r.Changed {
				r.Changed[i].Examples = nil
			}
			for i, g := range r.RuleChanged {
				for _, e := range g.Examples {
					if e.DecisionID != fmt.Sprintf("d-%d", e.Amount) {
						t.Errorf("example %+v does not name its decision", e)
					}
				}
				if len(g.Examples) != min(g.Count, impact.MaxExamples) {
					t.Errorf("%d examples of %d decisions", len(g.Examples), g.Count)
				}
				r.RuleChanged[i].Examples = nil
			}
			if !reflect.DeepEqual(r.Changed, tc.changed) || !reflect.DeepEqual(r.RuleChanged, tc.ruleChanged) || r.ChangedAmount != tc.total {
				t.Errorf("changed %+v (%s), rule changed %+v\nwant    %+v (%s), rule changed %+v", r.Changed, r.ChangedAmount, r.RuleChanged,
					tc.changed, tc.total, tc.ruleChanged)
			}
		})
	}
}

// A decision logged before inputs were recorded is skipped and counted.
func TestReplaySkipsDecisionsWithoutInput(t *testing.T) {
	log := decided(t, 6000, 7000)
	log = append(log, store.Decision{Seq: 3, Workflow: "W-old", N: 1, Tool: tool.IssueRefund,
		Args: tool.Args{Order: "O-1001", Amount: 6500}, Decision: "REQUIRE_APPROVAL", Rule: "R7-refund-needs-approval", Revision: "p1"})
	r, err := impact.Replay(context.Background(), variant(t, "p3", "p4", map[string]int{"refund_auto": 7500}), log)
	if err != nil {
		t.Fatal(err)
	}
	if r.Replayed != 2 || r.Skipped != 1 || len(r.Changed) != 1 || r.Changed[0].Count != 2 {
		t.Errorf("report %+v, want 2 replayed, 1 skipped, 2 changed", r)
	}
}

func TestReplayRefuses(t *testing.T) {
	ok := variant(t, "p3", "p4", nil)
	forbidden, err := bundles.Variant("p3", "p4-http", func(s string) string {
		return s + "\nreaches_out if http.send({\"method\": \"GET\", \"url\": \"http://example.com\"})\n"
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	fb, err := policy.LoadFS(forbidden)
	if err != nil {
		t.Fatal(err)
	}
	corrupt := decided(t, 6000)
	corrupt[0].Input = []byte(`{"tool": "issue_refund", "surprise": true}`)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name      string
		ctx       context.Context
		candidate *policy.Bundle
		log       []store.Decision
		want      error
	}{
		{"no candidate", context.Background(), nil, decided(t, 6000), policy.ErrInvalidBundle},
		{"a candidate calling a forbidden built-in", context.Background(), fb, decided(t, 6000), policy.ErrForbiddenBuiltin},
		{"a recorded input that does not decode", context.Background(), ok, corrupt, nil},
		{"a replay whose context ended", cancelled, ok, decided(t, 6000), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := impact.Replay(tc.ctx, tc.candidate, tc.log)
			if err == nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("Replay: %v, want %v", err, tc.want)
			}
		})
	}
}
