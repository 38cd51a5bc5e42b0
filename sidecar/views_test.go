package sidecar

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/countersign/countersign/executor/audit"
	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/impact"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/reconcile"
	"github.com/countersign/countersign/executor/review"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

// The executor's reports are also written by the command line (an export
// of the decision log, of the audit, a reconciliation, a dry run), which
// says it writes what the API answers. The API answers them in the
// client's types: converted, each writes the report byte for byte, every
// member set so that none is dropped or reordered unseen.
func TestViewsWriteTheReportsAsTheyAre(t *testing.T) {
	at := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	ref := reconcile.StepRef{Workflow: "W1", N: 2, Order: "O-1001"}
	rec := reconcile.Report{At: at, AutoLimit: 5000, Unexplained: 7, Explained: reconcile.Explained{Reversed: 1, Ratified: 2},
		Findings: reconcile.Findings{
			AgentDoneLedgerMissing: []reconcile.MissingEntry{{StepRef: ref, Amount: 100, Key: "k1"}},
			AmountMismatch:         []reconcile.AmountDifference{{StepRef: ref, StepAmount: 100, LedgerAmount: 200, Entry: "E1"}},
			LedgerEntryWithoutStep: []reconcile.UnclaimedEntry{{Entry: "E2", Kind: "refund", Order: "O-1", Amount: 3, By: "x", Key: "k2", Step: &ref},
				{Entry: "E3", Kind: "external", Order: "O-2", Amount: 4, By: "y"}},
			InFlightLedgerHasIt:            []reconcile.InFlight{{StepRef: ref, Amount: 5, Status: store.StepStarted, Entry: "E4"}},
			InFlightLedgerLacksIt:          []reconcile.InFlight{{StepRef: ref, Amount: 6, Status: store.StepUnknown}},
			RefundOverLimitWithoutApproval: []reconcile.OverLimit{{StepRef: ref, Amount: 9000, Rep: "rep-ana", At: at, Entry: "E5", Approval: "AP-1", Limit: 5000, Revision: "p1", Note: "n"}},
			ShipmentCountMismatch:          []reconcile.ShipmentDifference{{Order: "O-3", Shipments: 2, Steps: 1}},
		}}
	// Every class is counted and every failure class has its repair, as
	// a reconciliation's report always has them.
	counted := func(r reconcile.Report, n int) reconcile.Report {
		r.Classes, r.Repairs = reconcile.Counts{}, reconcile.Repairs{}
		for i, c := range reconcile.Classes() {
			r.Classes[c] = n * (i + 1)
			if repair, ok := reconcile.RepairOf(c); ok {
				r.Repairs[c] = repair
			}
		}
		return r
	}
	rec = counted(rec, 1)
	empty := counted(reconcile.Report{At: at}, 0) // [] for every class

	rv := review.Review{Against: review.Bundle{Revision: "p1", Digest: "d1"}, SecondOperator: []string{"a rule changed"},
		Diff:     []review.ModuleDiff{{Path: "call.rego", OldPath: "x.rego", Change: review.ModuleModified, Test: true, PolicyChanged: true, Unified: "-a\n+b\n", Truncated: true}},
		DataDiff: []policy.DataChange{{Path: "data.countersign.limits.refund_auto", Old: json.RawMessage(`5000`), New: json.RawMessage(`7500`), Change: policy.DataLoosens, Limit: "refund_auto"}},
		NewAllowances: review.Allowances{Count: 1, Evaluated: 9, Incomplete: "budget", Skipped: "s",
			Examples: []review.Allowance{{Kind: review.KindCall, Input: json.RawMessage(`{"tool":"issue_refund"}`),
				Active: review.Verdict{Decision: "DENY", Rule: "R3", Error: "e"}, Candidate: review.Verdict{Decision: "ALLOW"}}}}}
	tightening := review.Review{SecondOperator: []string{}, Diff: []review.ModuleDiff{}, DataDiff: []policy.DataChange{},
		NewAllowances: review.Allowances{Examples: []review.Allowance{}, Skipped: "same rules"}}

	imp := impact.Report{Replayed: 10, Skipped: 1, Changed: []impact.Change{{From: policy.Deny, To: policy.Allow, Rule: "R9", Count: 2,
		Examples: []impact.Example{{DecisionID: "D1", Workflow: "W1", N: 1, Order: "O-1", Amount: 700}, {DecisionID: "D2", Workflow: "W2", N: 3, Order: "O-2"}}}}}

	gate := policy.Report{Revision: "p2", Digest: "d2",
		Limits:        policy.Limits{RefundAuto: 1, RefundMax: 2, ReshipApprovalValue: 3, RepDaily: 4, RepWindow: 5 * time.Second, AgentHourly: 6, ApprovalTTL: 7 * time.Second, TokenTTL: 8 * time.Second},
		Changes:       []policy.LimitChange{{Name: "refund_auto", From: 5000, To: 7500}},
		LimitFailures: []policy.CaseResult{{Case: "limit_change_undeclared", Expected: "x", Got: "y"}},
		Cases:         []policy.CaseResult{{Case: "c", Amount: 5100, Expected: "REQUIRE_APPROVAL", Got: "ALLOW", ExpectedRule: "R7", GotRule: "R9", Error: "e"}},
		TestsPassed:   3, TestFailures: []string{"test_x"}}

	decision := engine.NewLogEntry(store.Decision{Seq: 4, ID: "D4", At: at, Path: "countersign/call/decision", Input: json.RawMessage(`{"a":1}`),
		Workflow: "W1", N: 1, User: "rep-ana", Tool: tool.IssueRefund, Args: tool.Args{Order: "O-1001", Amount: 3000},
		Decision: "ALLOW", Rule: "R9", Revision: "p1", Digest: "d1", AgentVersion: "v1", Mode: "auto", Shadow: true})
	lookup := engine.NewLogEntry(store.Decision{Seq: 5, At: at, Workflow: "W1", N: 2, Tool: tool.LookupOrder, Args: tool.Args{Order: "O-1001"}, Decision: "ALLOW"})

	page := audit.Page{Next: "01J", Records: []audit.Record{{ID: "01J", At: at, Kind: audit.KindEpoch, Actor: "ops-ida", Workflow: "W1", N: 1,
		Tool: "issue_refund", Args: json.RawMessage(`{"order":"O-1"}`), Detail: map[string]any{"epoch": json.Number("2")}, Prev: "p", Hash: "h"}}}
	verify := audit.Report{OK: false, Records: 3, Head: "h", Broken: &audit.Break{Index: 1, ID: "01K", Reason: audit.ReasonHash}}

	for _, tc := range []struct {
		name       string
		report, by any
	}{
		{"a reconciliation", rec, newReconciliation(rec)},
		{"a reconciliation without findings", empty, newReconciliation(empty)},
		{"a review", rv, newReview(rv)},
		{"the review of a pure tightening", tightening, newReview(tightening)},
		{"no review", review.Review{}, newReview(review.Review{})},
		{"an impact", imp, newImpact(imp)},
		{"a gate report", gate, newGateReport(gate)},
		{"a refund's decision", decision, newDecision(decision)},
		{"a lookup's decision", lookup, newDecision(lookup)},
		{"an audit page", page, newAuditPage(page)},
		{"an audit verification", verify, newAuditVerification(verify)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, err := json.Marshal(tc.report)
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.Marshal(tc.by)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Errorf("the API writes\n%s\nthe report is\n%s", got, want)
			}
		})
	}
}
