package engine_test

import (
	"context"
	"errors"
	"testing"

	"github.com/countersign/countersign/bundles"
	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

// allowingEveryone is p1 whose approver rules allow every approval: the
// widest any bundle can make them.
func allowingEveryone(t *testing.T) *policy.Bundle {
	t.Helper()
	fsys, err := bundles.Variant("p1", "p1-anyone-approves", func(s string) string { return s }, nil)
	if err != nil {
		t.Fatal(err)
	}
	fsys["approver/approver.rego"].Data = []byte("package countersign.approver\n\nverdict := {\"allowed\": true}\n")
	b, err := policy.LoadFS(fsys)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// as is fixture person like under another sub.
func as(like, sub string) engine.Person {
	p := person(like)
	p.ID = sub
	return p
}

// No bundle widens the approval floor: under approver rules that allow
// everyone, only a lead who is not the requester decides, the queue says
// so of each person, and a rep or an operator learns nothing of whether an
// approval id exists.
func TestNoBundleWidensTheApprovalFloor(t *testing.T) {
	h := newHarness(t, engine.DefaultControls())
	h.pol.Restore(allowingEveryone(t))
	h.workflow("rep-ben", "W1")
	s := h.propose("rep-ben", "W1", tool.IssueRefund, `{"order":"O-1004","amount":30000}`)
	if s.Status != store.StepWaitingApproval {
		t.Fatalf("the $300 refund is %s, want waiting_approval", s.Status)
	}
	ctx := context.Background()
	for _, c := range []struct {
		name string
		p    engine.Person
		id   string
		code string
	}{
		{"a rep approves", person("rep-cy"), s.Approval, "forbidden_role"},
		{"an operator approves", person("ops-ida"), s.Approval, "forbidden_role"},
		{"the requester approves", person("rep-ben"), s.Approval, "requester_cannot_approve"},
		{"the requester with a lead token under another spelling approves", as("lead-eli", "Rep-Ben"), s.Approval, "requester_cannot_approve"},
		{"the same in fullwidth", as("lead-eli", "ＲＥＰ－ＢＥＮ"), s.Approval, "requester_cannot_approve"},
		{"a rep approves an id nobody used", person("rep-cy"), "AP-404", "forbidden_role"},
		{"an operator approves an id nobody used", person("ops-ida"), "AP-404", "forbidden_role"},
	} {
		for _, verb := range []string{"approve", "reject"} {
			t.Run(c.name+" ("+verb+")", func(t *testing.T) {
				decide := h.eng.Approve
				if verb == "reject" {
					decide = h.eng.Reject
				}
				_, err := decide(ctx, c.p, c.id, "")
				var refused *engine.ApprovalRefused
				if !errors.As(err, &refused) || refused.Code != c.code {
					t.Errorf("%v, want refused %s", err, c.code)
				}
			})
		}
	}
	if _, err := h.eng.Approve(ctx, person("lead-eli"), "AP-404", ""); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("a lead approving an id nobody used: %v, want ErrNotFound", err)
	}
	for who, code := range map[string]string{"ops-ida": "forbidden_role", "lead-dee": "", "rep-cy": "forbidden_role"} {
		it, err := h.eng.ApprovalDetail(ctx, person(who), s.Approval)
		if who == "rep-cy" {
			if !errors.Is(err, engine.ErrNotFound) {
				t.Errorf("another rep reads the approval: %v, want ErrNotFound", err)
			}
			continue
		}
		if err != nil || it.CanApprove != (code == "") || it.Code != code {
			t.Errorf("%s's view: can approve %v code %q (%v), want code %q", who, it.CanApprove, it.Code, err, code)
		}
	}
	if _, err := h.eng.Resume(ctx, person("rep-ben"), "W1"); err != nil {
		t.Fatal(err)
	}
	if h.sys.refunds != 0 {
		t.Fatalf("refunds executed: %d", h.sys.refunds)
	}
	// Above the floor the bundle decides: a lead of another region is let
	// in by these rules.
	if _, err := h.eng.Approve(ctx, person("lead-dee"), s.Approval, ""); err != nil {
		t.Errorf("lead-dee under rules that allow everyone: %v", err)
	}
}

// The approver rules see canonical ids: with the floor removed, p1's own
// "not the requester" rule still refuses rep-ben approving his call under
// a lead token spelled Rep-Ben, because the input names one person once.
func TestApproverRulesSeeCanonicalIDs(t *testing.T) {
	c := engine.DefaultControls()
	c.ApprovalRoleFloor = false
	h := newHarness(t, c)
	h.workflow("rep-ben", "W1")
	s := h.propose("rep-ben", "W1", tool.IssueRefund, `{"order":"O-1004","amount":30000}`)
	_, err := h.eng.Approve(context.Background(), as("lead-eli", "Rep-Ben"), s.Approval, "")
	var refused *engine.ApprovalRefused
	if !errors.As(err, &refused) || refused.Code != string(policy.RequesterCannotApprove) {
		t.Fatalf("Rep-Ben approving rep-ben's call: %v, want requester_cannot_approve from the approver rules", err)
	}
	a, err := h.eng.Approve(context.Background(), person("lead-eli"), s.Approval, "")
	if err != nil || a.Approver != "lead-eli" {
		t.Fatalf("lead-eli approving: %+v %v", a, err)
	}
}
