package engine_test

import (
	"context"
	"errors"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/bundles"
	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/release"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

// member is one sidecar of a fleet on the harness's store: its own policy
// engine, following the bundle the store records as active.
func (h *harness) member() (*engine.Engine, *release.Service) {
	pol := policy.New(policy.Options{History: release.History{DB: h.db}, Clock: h.clock, Timeout: 5 * time.Second})
	svc := release.New(h.db, pol)
	c := h.control
	return engine.New(engine.Options{Store: h.db, Policy: pol, Systems: h.sys, Clock: h.clock, Controls: &c, Follow: svc.Follow}), svc
}

// strictApprovers is p1 whose approver rules let no lead of region EU
// approve a refund: a bundle that tightens who may approve (within what
// the gate's approver cases allow).
func strictApprovers(t *testing.T) *policy.Bundle {
	t.Helper()
	p1, err := bundles.Open("p1")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := fs.ReadFile(p1, "approver/approver.rego")
	if err != nil {
		t.Fatal(err)
	}
	rules := string(raw)
	strict := strings.Replace(rules, "input.amount <= input.approver.approve_limit",
		"input.amount <= input.approver.approve_limit\n\tinput.approver.region != \"EU\"", 1)
	if strict == rules {
		t.Fatal("p1's approver rules no longer compare the amount with approve_limit: update this test")
	}
	fsys, err := bundles.Variant("p1", "p1-strict-approvers", func(s string) string { return s }, map[string]string{
		"approver/approver.rego": strict,
		"approver/approver_test.rego": `package countersign.approver_test

import data.countersign.approver

test_no_refund_approved_in_the_eu if approver.verdict.code == "above_approver_limit" with input as {
	"approver": {"id": "lead-dee", "role": "lead", "region": "EU", "approve_limit": 50000},
	"requester": {"id": "rep-ana", "region": "EU"}, "tool": "issue_refund", "amount": 101, "now": 1, "expires": 2,
}
`,
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := policy.LoadFS(fsys)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestApproverRulesAreTheFleetsActiveBundles: a bundle activated through
// one sidecar decides the approvals made through another, which has not
// yet made a decision under it.
func TestApproverRulesAreTheFleetsActiveBundles(t *testing.T) {
	h := newHarness(t, engine.DefaultControls())
	ctx := context.Background()
	a, releasesA := h.member()
	b, releasesB := h.member()
	if _, err := releasesA.ActivateBundle(ctx, h.pol.Active(), policy.Activation{By: "ops-ida"}); err != nil {
		t.Fatal(err)
	}
	if err := releasesB.Follow(ctx); err != nil {
		t.Fatal(err)
	}
	h.eng = a
	h.workflow("rep-ana", "W1")
	s := h.propose("rep-ana", "W1", tool.IssueRefund, `{"order":"O-1002","amount":12000}`)
	if s.Status != store.StepWaitingApproval {
		t.Fatalf("$120 refund: %s, want waiting_approval", s.Status)
	}
	// A rule change: two operators activate it.
	if _, err := releasesA.ActivateBundle(ctx, strictApprovers(t), policy.Activation{By: "ops-jon", Proposer: "ops-ida"}); err != nil {
		t.Fatal(err)
	}

	_, err := b.Approve(ctx, person("lead-dee"), s.Approval, "")
	var refused *engine.ApprovalRefused
	if !errors.As(err, &refused) || refused.Code != "above_approver_limit" {
		t.Fatalf("lead-dee approving $120 through the other sidecar: %v; want above_approver_limit, the rule of the bundle now active", err)
	}
	queue, err := b.ApprovalQueue(ctx, person("lead-dee"), engine.ApprovalQuery{Status: store.ApprovalPending, All: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(queue) != 1 || queue[0].CanApprove || queue[0].Code != "above_approver_limit" {
		t.Fatalf("queue %+v, want the approval with can_approve false, above_approver_limit", queue)
	}
}

// TestAMemberStartedBeforeAnyBundleFollowsTheFirst: a sidecar that joined
// the fleet before any bundle was active decides with the one activated
// through another sidecar.
func TestAMemberStartedBeforeAnyBundleFollowsTheFirst(t *testing.T) {
	h := newHarness(t, engine.DefaultControls())
	ctx := context.Background()
	_, releasesA := h.member()
	b, _ := h.member()
	if _, err := releasesA.ActivateBundle(ctx, h.pol.Active(), policy.Activation{By: "ops-ida"}); err != nil {
		t.Fatal(err)
	}
	h.eng = b
	h.workflow("rep-ana", "W1")
	if s := h.propose("rep-ana", "W1", tool.IssueRefund, `{"order":"O-1001","amount":3000}`); s.Status != store.StepDone {
		t.Fatalf("$30 refund through the member that joined first: %s (%s), want done", s.Status, s.Note)
	}
}
