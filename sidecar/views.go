package sidecar

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"time"

	"github.com/countersign/countersign/executor/audit"
	"github.com/countersign/countersign/executor/buildinfo"
	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/impact"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/reconcile"
	"github.com/countersign/countersign/executor/review"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
	"github.com/countersign/countersign/sidecar/client"
)

// The answers' bodies are the Go client's types (sidecar/client): what
// the server writes is what the client reads, one type each, and the
// OpenAPI test holds each to sidecar/openapi.json field by field. They
// are built here, at the edge, from the store's records and the
// executor's reports, which keep their own types: a field added to a
// record for the engine's sake (a delegation, an idempotency key) never
// leaks into an answer, and the client imports nothing of the engine.
//
// A list that JSON shows as null when absent and [] when empty keeps the
// difference through each.

// The answers only the server writes (the client reads none of them).
type (
	healthAnswer struct {
		Status string `json:"status"`
	}
	readyAnswer struct {
		Status         string         `json:"status"`
		PolicyRevision string         `json:"policy_revision"`
		Version        buildinfo.Info `json:"version"`
	}
)

// each converts every element of in with f, nil to nil and [] to [].
func each[T, U any](in []T, f func(T) U) []U {
	if in == nil {
		return nil
	}
	out := make([]U, len(in))
	for i, v := range in {
		out[i] = f(v)
	}
	return out
}

func newTools(specs []tool.Spec) client.ToolList {
	return client.ToolList{Tools: each(specs, func(s tool.Spec) client.Tool {
		a := client.ToolAnnotations(s.Annotations)
		return client.Tool{Name: string(s.Name), Description: s.Description, InputSchema: s.InputSchema, Annotations: &a}
	})}
}

func newSwitches(sw map[tool.Name]bool) client.SwitchList {
	out := client.SwitchList{Switches: make(map[string]bool, len(sw))}
	for name, on := range sw {
		out.Switches[string(name)] = on
	}
	return out
}

func newWorkflowView(w store.Workflow) client.Workflow {
	v := client.Workflow{ID: w.ID, Ticket: w.Ticket, User: w.User, Status: client.WorkflowStatus(w.Status),
		PolicyRevision: w.PolicyRevision, Created: w.Created, Updated: w.Updated, AgentVersion: w.AgentVersion}
	if w.Bounds != (store.Bounds{}) {
		b := client.Bounds(w.Bounds)
		v.Bounds = &b
	}
	return v
}

// snapshotView is a workflow with its steps, from one engine read.
func snapshotView(snap engine.Snapshot) client.Workflow {
	v := newWorkflowView(snap.Workflow)
	v.Steps = make([]client.Step, 0, len(snap.Steps))
	for _, st := range snap.Steps {
		var a *store.Approval
		if found, ok := snap.Approvals[st.Approval]; ok && st.Approval != "" {
			a = &found
		}
		v.Steps = append(v.Steps, newStepView(st, a))
	}
	return v
}

// newStepView shows st with a, the approval it names (nil: none or gone).
// Decision and rule are shown even when empty.
func newStepView(st store.Step, a *store.Approval) client.Step {
	v := client.Step{Workflow: st.Workflow, N: st.N, Tool: string(st.Tool), Args: newArgsView(st.Tool, st.Args),
		Status: client.StepStatus(st.Status), Decision: st.Decision, Rule: st.Rule,
		Result: st.Result, Note: st.Note, DuplicateOf: st.DuplicateOf, AgentReason: st.AgentReason}
	if a != nil {
		v.Approval = &client.StepApproval{ID: a.ID, Status: client.ApprovalStatus(a.Status), Summary: a.Summary, Expires: a.Expires}
		if a.Status == store.ApprovalRejected {
			v.ApprovalComment = a.Comment
		}
	}
	// A step that did not run says why, while it is denied, waits or is held.
	switch r := st.Reason; {
	case r == nil:
	case st.Status == store.StepDenied, st.Status == store.StepWaitingApproval, st.Status == store.StepHeld:
		v.Reason = &client.Reason{Text: r.Text, Facts: r.Facts, Next: r.Next}
	}
	// A step whose effect may still land shows when the engine resolves it.
	if (st.Status == store.StepStarted || st.Status == store.StepUnknown) && !st.ResolveAfter.IsZero() {
		at := st.ResolveAfter.UTC()
		v.ResolveAfter = &at
	}
	return v
}

// newArgsView shows exactly the fields of the tool's schema: a refund's
// amount is shown even if zero, and no other tool shows one; a line-item
// refund shows its line and quantity too.
func newArgsView(name tool.Name, a tool.Args) client.Args {
	v := client.Args{Order: a.Order}
	if name == tool.IssueRefund {
		amount := a.Amount
		v.Amount, v.Line, v.Quantity = &amount, a.Line, a.Quantity
	}
	return v
}

func newApprovalView(a store.Approval) client.Approval {
	return client.Approval{ID: a.ID, Workflow: a.Workflow, N: a.N, Tool: string(a.Tool), Args: newArgsView(a.Tool, a.Args),
		Summary: a.Summary, Requester: a.Requester, Approver: a.Approver, Status: client.ApprovalStatus(a.Status),
		Comment: a.Comment, Retroactive: a.Retroactive, Created: a.Created, Expires: a.Expires, CallHash: a.CallHash,
		Rule: a.Rule, Ticket: a.Ticket, Customer: a.Customer, OrderPaid: a.OrderPaid, AgentReason: a.AgentReason}
}

// newApprovalItemView is an approval as the person reviewing it sees it.
func newApprovalItemView(it engine.ApprovalItem) client.Approval {
	v := newApprovalView(it.Approval)
	refunded, canApprove := it.Refunded, it.CanApprove
	v.OrderRefunded, v.CanApprove, v.Code = &refunded, &canApprove, it.Code
	if p := it.Previous; p != nil {
		v.Replaces = &client.ReplacedApproval{ID: p.ID, Args: newArgsView(p.Tool, p.Args), Status: client.ApprovalStatus(p.Status), CallHash: p.CallHash}
	}
	return v
}

func newModeView(m engine.ToolMode) client.Mode {
	v := client.Mode{Tool: string(m.Tool), Mode: string(m.Mode), Default: string(m.Default), Breakers: make([]client.Breaker, 0, len(m.Breakers))}
	if m.Set != nil {
		at := m.Set.At
		v.SetBy, v.Reason, v.SetAt = m.Set.By, m.Set.Reason, &at
	}
	for _, b := range m.Breakers {
		bv := client.Breaker{AgentVersion: b.AgentVersion, Failures: len(b.Failures), Tripped: b.Tripped()}
		if b.Trip != nil {
			bv.Trip = &client.BreakerTrip{At: b.Trip.At, Failures: b.Trip.Failures, WindowSeconds: b.Trip.WindowSeconds, Last: b.Trip.Last}
		}
		v.Breakers = append(v.Breakers, bv)
	}
	return v
}

func newDecisionsAnswer(p store.DecisionPage) client.DecisionPage {
	out := client.DecisionPage{Decisions: make([]client.Decision, 0, len(p.Decisions))}
	for _, d := range p.Decisions {
		out.Decisions = append(out.Decisions, newDecision(engine.NewLogEntry(d)))
	}
	if p.Next != 0 {
		out.NextCursor = newCursor(p.Next)
	}
	return out
}

// newDecision is a decision in the shape of OPA's decision log, which
// engine.NewLogEntry derives from the stored record.
func newDecision(e engine.LogEntry) client.Decision {
	return client.Decision{DecisionID: e.DecisionID, Timestamp: e.Timestamp, Path: e.Path, Input: e.Input,
		Result:  client.DecisionResult{Decision: e.Result.Decision, Rule: e.Result.Rule},
		Bundles: client.DecisionBundles{Countersign: client.DecisionBundle(e.Bundles.Countersign)},
		Seq:     e.Seq, At: e.At, Workflow: e.Workflow, N: e.N, User: e.User, Tool: string(e.Tool), Args: newArgsView(e.Tool, e.Args),
		Decision: e.Decision, Rule: e.Rule, Revision: e.Revision, AgentVersion: e.AgentVersion, Mode: e.Mode, Shadow: e.Shadow,
		Audit: e.Audit, AuditPending: e.AuditPending}
}

// A cursor is the sequence number of the last item a page showed (a
// decision's, or a workflow's creation number), opaque to clients:
// next_cursor is passed back as it came.
func newCursor(seq uint64) string {
	return base64.RawURLEncoding.EncodeToString(binary.BigEndian.AppendUint64(nil, seq))
}

// parseCursor reads a cursor newCursor wrote, and nothing else: a string
// base64 would also decode to the same number (a newline inside, other
// trailing bits) is not one.
func parseCursor(s string) (uint64, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return 0, err
	}
	if len(b) != 8 || binary.BigEndian.Uint64(b) == 0 || newCursor(binary.BigEndian.Uint64(b)) != s {
		return 0, errors.New("not a cursor")
	}
	return binary.BigEndian.Uint64(b), nil
}

func newAuditPage(p audit.Page) client.AuditPage {
	return client.AuditPage{Next: p.Next, Records: each(p.Records, newAuditRecord)}
}

// newAuditRecord is one record as the page and the ndjson export show it.
func newAuditRecord(r audit.Record) client.AuditRecord {
	return client.AuditRecord{ID: r.ID, At: r.At, Kind: string(r.Kind), Actor: r.Actor, Workflow: r.Workflow, N: r.N,
		Tool: r.Tool, Args: r.Args, Detail: r.Detail, Pending: r.Pending, Version: r.Version, Prev: r.Prev, Hash: r.Hash}
}

func newAuditVerification(r audit.Report) client.AuditVerification {
	v := client.AuditVerification{OK: r.OK, Records: r.Records, Head: r.Head, Unsequenced: r.Unsequenced,
		Checkpoints: r.Checkpoints, Anchored: r.Anchored}
	if r.Unsequenced > 0 {
		v.OldestUnsequenced = &r.OldestUnsequenced
	}
	if r.Broken != nil {
		v.Broken = &client.AuditBreak{Index: r.Broken.Index, ID: r.Broken.ID, Reason: r.Broken.Reason}
	}
	return v
}

// newReconciliation shows a report with its classes, findings and repairs
// in report order, every class present, [] for no findings.
func newReconciliation(r reconcile.Report) client.Reconciliation {
	f := r.Findings
	ref := func(s reconcile.StepRef) client.StepRef { return client.StepRef(s) }
	repair := func(c reconcile.Class) client.Repair { return client.Repair(r.Repairs[c]) }
	inFlight := func(i reconcile.InFlight) client.InFlight {
		return client.InFlight{StepRef: ref(i.StepRef), Amount: i.Amount, Status: client.StepStatus(i.Status), Entry: i.Entry}
	}
	return client.Reconciliation{At: r.At, AutoLimit: r.AutoLimit, Unexplained: r.Unexplained, Explained: client.Explained(r.Explained),
		Classes: client.ClassCounts{
			Matched:                        r.Count(reconcile.Matched),
			AgentDoneLedgerMissing:         r.Count(reconcile.AgentDoneLedgerMissing),
			AmountMismatch:                 r.Count(reconcile.AmountMismatch),
			LedgerEntryWithoutStep:         r.Count(reconcile.LedgerEntryWithoutStep),
			InFlightLedgerHasIt:            r.Count(reconcile.InFlightLedgerHasIt),
			InFlightLedgerLacksIt:          r.Count(reconcile.InFlightLedgerLacksIt),
			RefundOverLimitWithoutApproval: r.Count(reconcile.RefundOverLimitWithoutApproval),
			ShipmentCountMismatch:          r.Count(reconcile.ShipmentCountMismatch),
		},
		Findings: client.Findings{
			Matched: []struct{}{},
			AgentDoneLedgerMissing: listed(f.AgentDoneLedgerMissing, func(m reconcile.MissingEntry) client.MissingEntry {
				return client.MissingEntry{StepRef: ref(m.StepRef), Amount: m.Amount, Key: m.Key}
			}),
			AmountMismatch: listed(f.AmountMismatch, func(d reconcile.AmountDifference) client.AmountDifference {
				return client.AmountDifference{StepRef: ref(d.StepRef), StepAmount: d.StepAmount, LedgerAmount: d.LedgerAmount, Entry: d.Entry}
			}),
			LedgerEntryWithoutStep: listed(f.LedgerEntryWithoutStep, func(u reconcile.UnclaimedEntry) client.UnclaimedEntry {
				v := client.UnclaimedEntry{Entry: u.Entry, Kind: u.Kind, Order: u.Order, Amount: u.Amount, By: u.By, Key: u.Key}
				if u.Step != nil {
					s := ref(*u.Step)
					v.Step = &s
				}
				return v
			}),
			InFlightLedgerHasIt:   listed(f.InFlightLedgerHasIt, inFlight),
			InFlightLedgerLacksIt: listed(f.InFlightLedgerLacksIt, inFlight),
			RefundOverLimitWithoutApproval: listed(f.RefundOverLimitWithoutApproval, func(o reconcile.OverLimit) client.OverLimit {
				return client.OverLimit{StepRef: ref(o.StepRef), Amount: o.Amount, Rep: o.Rep, At: o.At, Entry: o.Entry,
					Approval: o.Approval, Limit: o.Limit, Revision: o.Revision, Note: o.Note}
			}),
			ShipmentCountMismatch: listed(f.ShipmentCountMismatch, func(d reconcile.ShipmentDifference) client.ShipmentDifference {
				return client.ShipmentDifference(d)
			}),
		},
		Repairs: client.Repairs{
			AgentDoneLedgerMissing:         repair(reconcile.AgentDoneLedgerMissing),
			AmountMismatch:                 repair(reconcile.AmountMismatch),
			LedgerEntryWithoutStep:         repair(reconcile.LedgerEntryWithoutStep),
			InFlightLedgerHasIt:            repair(reconcile.InFlightLedgerHasIt),
			InFlightLedgerLacksIt:          repair(reconcile.InFlightLedgerLacksIt),
			RefundOverLimitWithoutApproval: repair(reconcile.RefundOverLimitWithoutApproval),
			ShipmentCountMismatch:          repair(reconcile.ShipmentCountMismatch),
		},
	}
}

// listed is each, with [] for none: a report lists every class.
func listed[T, U any](in []T, f func(T) U) []U {
	if in == nil {
		return []U{}
	}
	return each(in, f)
}

// newBundleView is one activation attempt. Failures is null, not [], for
// a record stored without any, as it always has been.
func newBundleView(r store.BundleRecord) client.Bundle {
	return client.Bundle{Seq: r.Seq, Revision: r.Revision, Digest: r.Digest, Status: client.BundleStatus(r.Status), By: r.By,
		Proposer: r.Proposer, At: r.At, BreakGlass: r.BreakGlass, Reason: r.Reason, Rollback: r.Rollback,
		LimitChanges: each(r.LimitChanges, func(c store.LimitChange) client.LimitChange { return client.LimitChange(c) }),
		Failures: each(r.Failures, func(f store.BundleFailure) client.GateCase {
			return client.GateCase{Case: f.Case, Amount: f.Amount, Expected: f.Expected, Got: f.Got, ExpectedRule: f.ExpectedRule, GotRule: f.GotRule}
		}),
		TestFailures: r.TestFailures, Impact: storedImpact(r), Review: storedReview(r)}
}

// newBundleViews is the history without the reviews: each may hold a
// megabyte of diffs, and GET /v1/bundles/{digest} answers one.
func newBundleViews(h []store.BundleRecord) []client.Bundle {
	out := make([]client.Bundle, 0, len(h))
	for _, r := range h {
		r.Review = nil
		out = append(out, newBundleView(r))
	}
	return out
}

// storedReview is a record's review, or none for a record kept without
// one (or with one this version cannot read).
func storedReview(r store.BundleRecord) client.Review {
	var rv review.Review
	if len(r.Review) == 0 || json.Unmarshal(r.Review, &rv) != nil {
		return client.Review{}
	}
	return newReview(rv)
}

// storedImpact is a record's replay of recent decisions, or nil for a
// record kept without one (or with one this version cannot read).
func storedImpact(r store.BundleRecord) *client.Impact {
	var rep impact.Report
	if len(r.Impact) == 0 || json.Unmarshal(r.Impact, &rep) != nil {
		return nil
	}
	v := newImpact(rep)
	return &v
}

func newReview(rv review.Review) client.Review {
	a := rv.NewAllowances
	verdict := func(v review.Verdict) client.Verdict { return client.Verdict(v) }
	return client.Review{Against: client.BundleRef(rv.Against), SecondOperator: rv.SecondOperator,
		Diff: each(rv.Diff, func(d review.ModuleDiff) client.ModuleDiff {
			return client.ModuleDiff{Path: d.Path, OldPath: d.OldPath, Change: string(d.Change), Test: d.Test,
				PolicyChanged: d.PolicyChanged, Unified: d.Unified, Truncated: d.Truncated}
		}),
		DataDiff: each(rv.DataDiff, func(d policy.DataChange) client.DataChange {
			return client.DataChange{Path: d.Path, Old: d.Old, New: d.New, Change: string(d.Change), Limit: d.Limit}
		}),
		NewAllowances: client.Allowances{Count: a.Count, Evaluated: a.Evaluated, Incomplete: a.Incomplete, Skipped: a.Skipped,
			Examples: each(a.Examples, func(x review.Allowance) client.Allowance {
				return client.Allowance{Kind: x.Kind, Input: x.Input, Active: verdict(x.Active), Candidate: verdict(x.Candidate)}
			})},
	}
}

func newImpact(r impact.Report) client.Impact {
	example := func(x impact.Example) client.ImpactExample { return client.ImpactExample(x) }
	return client.Impact{Replayed: r.Replayed, Skipped: r.Skipped, ChangedAmount: r.ChangedAmount,
		Changed: each(r.Changed, func(c impact.Change) client.ImpactChange {
			return client.ImpactChange{From: string(c.From), To: string(c.To), Rule: c.Rule, Count: c.Count, Amount: c.Amount,
				Examples: each(c.Examples, example)}
		}),
		RuleChanged: each(r.RuleChanged, func(c impact.RuleChange) client.ImpactRuleChange {
			return client.ImpactRuleChange{Decision: string(c.Decision), FromRule: c.FromRule, ToRule: c.ToRule, Count: c.Count,
				Amount: c.Amount, Examples: each(c.Examples, example)}
		}),
	}
}

func newGateReport(r policy.Report) client.GateReport {
	result := func(c policy.CaseResult) client.GateResult { return client.GateResult(c) }
	l := r.Limits
	return client.GateReport{Revision: r.Revision, Digest: r.Digest,
		Limits: client.Limits{RefundAuto: l.RefundAuto, RefundMax: l.RefundMax, ReshipApprovalValue: l.ReshipApprovalValue,
			RepDaily: l.RepDaily, RepWindowSeconds: int64(l.RepWindow / time.Second), AgentHourly: l.AgentHourly,
			ApprovalTTLSeconds: int64(l.ApprovalTTL / time.Second), TokenTTLSeconds: int64(l.TokenTTL / time.Second)},
		LimitChanges:  newLimitChanges(r.Changes),
		LimitFailures: each(r.LimitFailures, result), Cases: each(r.Cases, result),
		TestsPassed: r.TestsPassed, TestFailures: r.TestFailures}
}

func newLimitChanges(cs []policy.LimitChange) []client.LimitChange {
	return each(cs, func(c policy.LimitChange) client.LimitChange { return client.LimitChange(c) })
}
