package policy_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/simclock"
	"github.com/countersign/countersign/executor/tool"
)

var ctx = context.Background()

// relaxed is the evaluation deadline of tests that are not about it: a
// decision takes well under a millisecond, but under the race detector on
// a loaded machine 100 ms was missed.
const relaxed = 5 * time.Second

func activeEngine(t testing.TB, name string, opts policy.Options) *policy.Engine {
	t.Helper()
	if opts.Timeout == 0 {
		opts.Timeout = relaxed
	}
	e := policy.New(opts)
	if _, err := e.Activate(ctx, embedded(t, name), policy.Activation{By: "ops-ida"}); err != nil {
		t.Fatalf("activate %s: %v", name, err)
	}
	return e
}

// The decision table the demo prints, through the engine with bundle p1.
func TestDecideSeedTable(t *testing.T) {
	e := activeEngine(t, "p1", policy.Options{})
	tests := []struct {
		user     *policy.User
		order    string
		amount   money.Cents
		decision policy.Decision
		rule     string
	}{
		{repAna, "O-1001", 3000, policy.Allow, "default-allow-after-checks"},
		{repAna, "O-1002", 12000, policy.RequireApproval, "R7-refund-needs-approval"},
		{repAna, "O-1002", 60000, policy.Deny, "R3-refund-over-ceiling"},
		{repAna, "O-1003", 2000, policy.Deny, "R2-order-outside-region"},
		{repCy, "O-1003", 2000, policy.Deny, "R1-scope-not-delegated"},
		{repAna, "O-1001", 15000, policy.Deny, "R4-exceeds-amount-paid"},
	}
	for _, tt := range tests {
		t.Run(tt.user.ID+" "+tt.order+" "+tt.amount.String(), func(t *testing.T) {
			got, err := e.Decide(ctx, refund(tt.user, tt.order, tt.amount))
			if err != nil {
				t.Fatal(err)
			}
			want := policy.Result{Decision: tt.decision, Rule: tt.rule, Revision: "p1"}
			if got != want {
				t.Errorf("got %+v, want %+v", got, want)
			}
		})
	}
}

func TestDecideTools(t *testing.T) {
	e := activeEngine(t, "p1", policy.Options{})
	notShipped := order("O-1005")
	tests := []struct {
		name string
		in   policy.Input
		want policy.Decision
		rule string
	}{
		{"lookup", policy.Input{User: repAna, Tool: tool.LookupOrder, Args: tool.Args{Order: "O-1001"}, Order: order("O-1001")}, policy.Allow, "default-allow-after-checks"},
		{"reship paid $120", policy.Input{User: repAna, Tool: tool.ReshipOrder, Args: tool.Args{Order: "O-1001"}, Order: order("O-1001")}, policy.Allow, "default-allow-after-checks"},
		{"reship paid $480", policy.Input{User: repAna, Tool: tool.ReshipOrder, Args: tool.Args{Order: "O-1002"}, Order: order("O-1002")}, policy.RequireApproval, "R9-reship-needs-approval"},
		{"reship not shipped", policy.Input{User: repAna, Tool: tool.ReshipOrder, Args: tool.Args{Order: "O-1005"}, Order: notShipped}, policy.Deny, "R8-order-not-shipped"},
		{"no user", policy.Input{Tool: tool.LookupOrder, Args: tool.Args{Order: "O-1001"}, Order: order("O-1001")}, policy.Deny, "R0-unknown-user"},
		{"no order", policy.Input{User: repAna, Tool: tool.IssueRefund, Args: tool.Args{Order: "O-1001", Amount: 100}}, policy.Deny, "R2-order-outside-region"},
		{"unknown tool", policy.Input{User: repAna, Tool: "delete_order", Order: order("O-1001")}, policy.Deny, "default-deny"},
		{"second reship of an order needs a lead", reship("O-1001", 1), policy.RequireApproval, "R10-order-already-reshipped"},
		{"second reship above the approval value is still R10", reship("O-1002", 1), policy.RequireApproval, "R10-order-already-reshipped"},
		{"third reship of an order is denied", reship("O-1001", 2), policy.Deny, "R11-reship-limit"},
		{"any later reship is denied", reship("O-1001", 7), policy.Deny, "R11-reship-limit"},
		{"a reship counted on an unshipped order is R8", func() policy.Input {
			in := reship("O-1005", 2)
			in.Order = notShipped
			return in
		}(), policy.Deny, "R8-order-not-shipped"},
		{"split refund", func() policy.Input {
			in := refund(repAna, "O-1001", 3000)
			in.Totals.OrderRefunded = 3000
			return in
		}(), policy.RequireApproval, "R7-refund-needs-approval"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := e.Decide(ctx, tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if got.Decision != tt.want || got.Rule != tt.rule {
				t.Errorf("got %+v, want %s %s", got, tt.want, tt.rule)
			}
		})
	}
}

// The approval-authority table the demo prints: $400 on O-1004 requested
// by rep-ben.
func TestCheckApproverSeedTable(t *testing.T) {
	e := activeEngine(t, "p1", policy.Options{})
	created := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	in := func(who string, after time.Duration) policy.ApproverInput {
		return policy.ApproverInput{
			Approver:  approver(who),
			Requester: policy.Requester{ID: "rep-ben", Region: "US"},
			Tool:      tool.IssueRefund,
			Amount:    40000,
			Expires:   created.Add(15 * time.Minute),
			Now:       created.Add(after),
		}
	}
	tests := []struct {
		in   policy.ApproverInput
		want policy.Refusal
	}{
		{in("rep-ben", time.Minute), policy.RequesterCannotApprove},
		{in("rep-cy", time.Minute), policy.ApproverNotLead},
		{in("lead-fay", time.Minute), policy.AboveApproverLimit},
		{in("lead-dee", time.Minute), policy.ApproverOutsideRegion},
		{in("lead-eli", 1000*time.Second), policy.ApprovalExpired},
		{in("lead-eli", time.Minute), ""},
	}
	for _, tt := range tests {
		t.Run(tt.in.Approver.ID, func(t *testing.T) {
			got, err := e.CheckApprover(ctx, tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestNoBundle(t *testing.T) {
	e := policy.New(policy.Options{Timeout: relaxed})
	if _, err := e.Decide(ctx, refund(repAna, "O-1001", 3000)); !errors.Is(err, policy.ErrNoBundle) {
		t.Errorf("Decide: %v", err)
	}
	if _, err := e.CheckApprover(ctx, policy.ApproverInput{}); !errors.Is(err, policy.ErrNoBundle) {
		t.Errorf("CheckApprover: %v", err)
	}
	if _, err := e.Limits(); !errors.Is(err, policy.ErrNoBundle) {
		t.Errorf("Limits: %v", err)
	}
	if e.Revision() != "" || e.Active() != nil {
		t.Errorf("revision %q", e.Revision())
	}
}

func TestLimits(t *testing.T) {
	e := activeEngine(t, "p1", policy.Options{})
	got, err := e.Limits()
	if err != nil {
		t.Fatal(err)
	}
	want := policy.Limits{
		RefundAuto: 5000, RefundMax: 50000, ReshipApprovalValue: 30000, RepDaily: 100000,
		RepWindow: 24 * time.Hour, AgentHourly: 300000, ApprovalTTL: 15 * time.Minute, TokenTTL: time.Minute,
	}
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

// A bundle that answers in a shape the engine does not know is never read
// as an Allow: every such answer is an error.
func TestFailClosedOnUnexpectedResult(t *testing.T) {
	tests := []struct {
		name     string
		callRego string
		approver string // replaces the real approver policy when set
	}{
		{name: "decision is a string", callRego: "package countersign.call\n\ndecision := \"ALLOW\"\n"},
		{name: "decision undefined", callRego: "package countersign.call\n\ndecision := {\"decision\": \"ALLOW\", \"rule\": \"x\"} if input.never\n"},
		{name: "decision unknown", callRego: "package countersign.call\n\ndecision := {\"decision\": \"MAYBE\", \"rule\": \"x\"}\n"},
		{name: "rule missing", callRego: "package countersign.call\n\ndecision := {\"decision\": \"ALLOW\"}\n"},
		{name: "extra field", callRego: "package countersign.call\n\ndecision := {\"decision\": \"ALLOW\", \"rule\": \"x\", \"why\": 1}\n"},
		{name: "package missing", callRego: "package countersign.other\n\nx := 1\n"},
		{name: "verdict unknown code", approver: "package countersign.approver\n\nverdict := {\"allowed\": false, \"code\": \"because\"}\n"},
		{name: "verdict allowed with code", approver: "package countersign.approver\n\nverdict := {\"allowed\": true, \"code\": \"approver_not_lead\"}\n"},
		{name: "verdict a boolean", approver: "package countersign.approver\n\nverdict := true\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			call := tt.callRego
			if call == "" {
				call = regoSource(t, "call/call.rego")
			}
			fsys := customFS(t, "odd", call, p1Limits, nil)
			if tt.approver != "" {
				fsys["approver/approver.rego"].Data = []byte(tt.approver)
			}
			b, err := policy.LoadFS(fsys)
			if err != nil {
				t.Fatal(err)
			}
			e := policy.New(policy.Options{Timeout: relaxed})
			e.Restore(b)
			if tt.approver == "" {
				got, err := e.Decide(ctx, bigRefund(3000))
				if !errors.Is(err, policy.ErrUnexpectedResult) || got.Decision == policy.Allow {
					t.Errorf("Decide = %+v, %v; want ErrUnexpectedResult", got, err)
				}
				return
			}
			got, err := e.CheckApprover(ctx, policy.ApproverInput{Approver: approver("lead-eli")})
			if !errors.Is(err, policy.ErrUnexpectedResult) {
				t.Errorf("CheckApprover = %q, %v; want ErrUnexpectedResult", got, err)
			}
		})
	}
}

func TestActivateRecordsHistory(t *testing.T) {
	clock := simclock.New(time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC))
	h := &policy.MemHistory{}
	e := policy.New(policy.Options{History: h, Clock: clock, Timeout: relaxed})

	p1 := embedded(t, "p1")
	if _, err := e.Activate(ctx, p1, policy.Activation{By: "ops-ida"}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Hour)
	report, err := e.Activate(ctx, embedded(t, "p2"), policy.Activation{By: "ops-ida"})
	var gate *policy.GateError
	if !errors.Is(err, policy.ErrGateFailed) || !errors.As(err, &gate) {
		t.Fatalf("activate p2: %v", err)
	}
	if len(gate.Report.Failures()) != 5 || len(report.Failures()) != 5 {
		t.Errorf("gate error carries %d failures, report %d", len(gate.Report.Failures()), len(report.Failures()))
	}
	clock.Advance(time.Hour)
	if _, err := e.Activate(ctx, embedded(t, "p3"), policy.Activation{By: "ops-ida"}); err != nil {
		t.Fatal(err)
	}

	recs := h.Records()
	want := []struct {
		revision string
		status   policy.Status
		failures int
		at       time.Time
	}{
		{"p1", policy.StatusSuperseded, 0, clock.Now().Add(-2 * time.Hour)},
		{"p2", policy.StatusRejected, 5, clock.Now().Add(-time.Hour)},
		{"p3", policy.StatusActive, 0, clock.Now()},
	}
	if len(recs) != len(want) {
		t.Fatalf("%d records, want %d", len(recs), len(want))
	}
	for i, w := range want {
		r := recs[i]
		if r.Revision != w.revision || r.Status != w.status || len(r.Failures) != w.failures || !r.At.Equal(w.at) || r.By != "ops-ida" {
			t.Errorf("record %d = %s %s %d failures at %s by %s, want %+v", i, r.Revision, r.Status, len(r.Failures), r.At, r.By, w)
		}
		if len(r.Digest) != 64 || len(r.Bundle) == 0 {
			t.Errorf("record %d lacks digest or bundle bytes", i)
		}
	}
	// The recorded bytes load again as the same bundle.
	again, err := policy.LoadArchive(recs[2].Bundle)
	if err != nil || again.Digest() != recs[2].Digest {
		t.Errorf("reload recorded bundle: %v", err)
	}
}

// The gate cannot be bypassed by a bundle that loosens a limit without
// declaring it and ships tests that agree with the looser limit; the
// active bundle keeps answering.
func TestGateCannotBeBypassedByOwnTests(t *testing.T) {
	const looseTests = `package countersign.loose_test

import data.countersign.call

# Written against the bundle's own data: $51.00 passes without approval.
test_51_is_auto_approved if {
	d := call.decision with input as {
		"user": {"id": "rep-ana", "role": "rep", "region": "EU", "scopes": ["refund"]},
		"tool": "issue_refund",
		"args": {"order": "O-1", "amount": 5100},
		"order": {"id": "O-1", "region": "EU", "paid": 100000, "status": "shipped"},
		"totals": {"order_refunded": 0, "rep_day": 0, "agent_hour": 0},
	}
	d.decision == "ALLOW"
}
`
	loose := customBundle(t, "loose", regoSource(t, "call/call.rego"),
		`{"countersign": {"limits": {"refund_auto": 10000, "refund_max": 50000,
		  "reship_approval_value": 30000, "rep_daily": 100000, "rep_window_seconds": 86400,
		  "agent_hourly": 300000, "approval_ttl_seconds": 900, "token_ttl_seconds": 60}}}`,
		map[string]string{"call/loose_test.rego": looseTests})

	report, err := policy.Check(ctx, loose, baseline(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(report.TestFailures) != 0 || report.TestsPassed != 1 {
		t.Fatalf("the bundle's own test should pass: %d passed, %v", report.TestsPassed, report.TestFailures)
	}
	f := report.Failures()
	if len(f) != 2 || f[0].Case != policy.LimitChangeUndeclared || f[1].Amount != 5100 || f[1].Got != "ALLOW" {
		t.Fatalf("failures = %+v, want refund_auto undeclared and the $51.00 case", f)
	}

	h := &policy.MemHistory{}
	e := activeEngine(t, "p1", policy.Options{History: h})
	if _, err := e.Activate(ctx, loose, policy.Activation{By: "ops-ida"}); !errors.Is(err, policy.ErrGateFailed) {
		t.Fatalf("activate loose: %v", err)
	}
	got, err := e.Decide(ctx, bigRefund(5100))
	if err != nil {
		t.Fatal(err)
	}
	if got.Revision != "p1" || got.Decision != policy.RequireApproval {
		t.Errorf("after the rejected activation: %+v, want p1 REQUIRE_APPROVAL", got)
	}
	if recs := h.Records(); recs[len(recs)-1].Status != policy.StatusRejected {
		t.Errorf("last record %+v, want rejected", recs[len(recs)-1])
	}
}

func TestGateRunsTheBundlesOwnTests(t *testing.T) {
	call := regoSource(t, "call/call.rego")
	tests := []struct {
		name string
		test string
		want string
	}{
		{"failing test", "package countersign.own_test\n\ntest_fails if false\n", "countersign.own_test.test_fails: FAIL"},
		{"test with a builtin error", "package countersign.own_test\n\ntest_errs if to_number(\"x\") == 1\n", "countersign.own_test.test_errs: "},
		{"test that does not compile", "package countersign.own_test\n\ntest_x if no_such_rule\n", "tests do not compile"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The broken test file does not stop the bundle from loading:
			// test files are not part of the compiled policy.
			// Gated twice: a failed run is never remembered as a pass.
			b := customBundle(t, "own", call, p1Limits, map[string]string{"own_test.rego": tt.test})
			for range 2 {
				r, err := policy.Check(ctx, b, baseline(t))
				if err != nil {
					t.Fatal(err)
				}
				if len(r.TestFailures) != 1 || !strings.Contains(r.TestFailures[0], tt.want) || r.Passed() {
					t.Errorf("test failures = %q, want one containing %q", r.TestFailures, tt.want)
				}
				if len(r.Failures()) != 0 {
					t.Errorf("gate case failures %+v", r.Failures())
				}
			}
		})
	}
}

// TestGatedAgainPassesTheSameTests: a bundle whose tests passed passes
// again with the same count, whether or not they run again.
func TestGatedAgainPassesTheSameTests(t *testing.T) {
	b := embedded(t, "p1")
	first, err := policy.Check(ctx, b, baseline(t))
	if err != nil {
		t.Fatal(err)
	}
	again, err := policy.Check(ctx, embedded(t, "p1"), baseline(t))
	if err != nil {
		t.Fatal(err)
	}
	if first.TestsPassed == 0 || again.TestsPassed != first.TestsPassed || len(again.TestFailures) != 0 {
		t.Fatalf("first gate: %d passed; again: %d passed, failures %v", first.TestsPassed, again.TestsPassed, again.TestFailures)
	}
}

func TestBreakGlass(t *testing.T) {
	h := &policy.MemHistory{}
	e := activeEngine(t, "p1", policy.Options{History: h})
	p2 := embedded(t, "p2")

	if _, err := e.Activate(ctx, p2, policy.Activation{By: "ops-jon", Proposer: "ops-ida", BreakGlass: true, Reason: "  "}); !errors.Is(err, policy.ErrReasonRequired) {
		t.Fatalf("break glass without a reason: %v", err)
	}
	if n := len(h.Records()); n != 1 {
		t.Errorf("a refused break-glass request was recorded (%d records)", n)
	}
	if _, err := e.Activate(ctx, p2, policy.Activation{By: "ops-jon", Proposer: "ops-ida", BreakGlass: true, Reason: "drill: release p2 without the gate"}); err != nil {
		t.Fatal(err)
	}
	if e.Revision() != "p2" {
		t.Errorf("active %q, want p2", e.Revision())
	}
	last := h.Records()[1]
	if !last.BreakGlass || last.Status != policy.StatusActive || last.Reason == "" {
		t.Errorf("record %+v", last)
	}
}

type failingHistory struct{}

func (failingHistory) Record(context.Context, policy.HistoryRecord) error {
	return errors.New("disk full")
}

// A bundle is never active without its history record.
func TestActivateNeedsHistory(t *testing.T) {
	e := policy.New(policy.Options{History: failingHistory{}, Timeout: relaxed})
	if _, err := e.Activate(ctx, embedded(t, "p1"), policy.Activation{By: "ops-ida"}); err == nil {
		t.Fatal("activated without a record")
	}
	if e.Active() != nil {
		t.Errorf("active %q", e.Revision())
	}
}

// Decisions racing activations see one bundle or the other, never a mix:
// p1 holds $51.00 for approval and p2 allows it.
func TestSwapIsAtomic(t *testing.T) {
	p1, p2 := embedded(t, "p1"), embedded(t, "p2")
	e := policy.New(policy.Options{Timeout: relaxed})
	e.Restore(p1)
	want := map[string]policy.Result{
		"p1": {Decision: policy.RequireApproval, Rule: "R7-refund-needs-approval", Revision: "p1"},
		"p2": {Decision: policy.Allow, Rule: "default-allow-after-checks", Revision: "p2"},
	}

	const readers, decisions = 2, 300
	var wg sync.WaitGroup
	seen := make([]map[string]int, readers)
	for r := range seen {
		seen[r] = map[string]int{}
		wg.Go(func() {
			for range decisions {
				got, err := e.Decide(ctx, bigRefund(5100))
				if err != nil {
					t.Error(err)
					return
				}
				if got != want[got.Revision] {
					t.Errorf("mixed answer %+v", got)
					return
				}
				seen[r][got.Revision]++
			}
		})
	}
	readersDone := make(chan struct{})
	go func() { wg.Wait(); close(readersDone) }()

	// Swap for as long as the readers read.
	for i := 0; ; i++ {
		select {
		case <-readersDone:
			total := map[string]int{}
			for _, s := range seen {
				for rev, n := range s {
					total[rev] += n
				}
			}
			if total["p1"] == 0 || total["p2"] == 0 {
				t.Errorf("readers saw %v over %d swaps; want both revisions", total, i)
			}
			return
		default:
		}
		b := p1
		if i%2 == 0 {
			b = p2
		}
		if err := e.Restore(b); err != nil { // the swap alone, without the gate's time
			t.Fatal(err)
		}
	}
}
