package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/bundles"
	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

func TestSeedPolicyDecisions(t *testing.T) {
	h := newHarness(t, engine.DefaultControls())
	for i, tc := range []struct {
		rep, order string
		amount     int
		decision   string
		rule       string
		status     store.StepStatus
	}{
		{"rep-ana", "O-1001", 3000, "ALLOW", "default-allow-after-checks", store.StepDone},
		{"rep-ana", "O-1002", 12000, "REQUIRE_APPROVAL", "R7-refund-needs-approval", store.StepWaitingApproval},
		{"rep-ana", "O-1002", 60000, "DENY", "R3-refund-over-ceiling", store.StepDenied},
		{"rep-ana", "O-1003", 2000, "DENY", "R2-order-outside-region", store.StepDenied},
		{"rep-cy", "O-1003", 2000, "DENY", "R1-scope-not-delegated", store.StepDenied},
		{"rep-ana", "O-1001", 15000, "DENY", "R4-exceeds-amount-paid", store.StepDenied},
	} {
		wf := fmt.Sprintf("D%d", i)
		h.workflow(tc.rep, wf)
		s := h.propose(tc.rep, wf, tool.IssueRefund, fmt.Sprintf(`{"order":%q,"amount":%d}`, tc.order, tc.amount))
		if s.Decision != tc.decision || s.Rule != tc.rule || s.Status != tc.status {
			t.Errorf("%s %s $%d: %s %s %s; want %s %s %s", tc.rep, tc.order, tc.amount/100, s.Decision, s.Rule, s.Status, tc.decision, tc.rule, tc.status)
		}
	}
}

// Fifty refunds of $49 on one order, from fifty workflows at once: the
// first reserves the auto headroom, every other one needs an approval.
func TestConcurrentRefundsShareHeadroom(t *testing.T) {
	h := newHarness(t, engine.DefaultControls())
	for i := range 50 {
		h.workflow("rep-ana", fmt.Sprintf("C%d", i))
	}
	var wg sync.WaitGroup
	statuses := make([]store.StepStatus, 50)
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := h.eng.Propose(context.Background(), person("rep-ana"), fmt.Sprintf("C%d", i), tool.IssueRefund, json.RawMessage(`{"order":"O-1002","amount":4900}`))
			if err != nil {
				t.Error(err)
			}
			statuses[i] = s.Status
		}()
	}
	wg.Wait()
	count := map[store.StepStatus]int{}
	for _, s := range statuses {
		count[s]++
	}
	if count[store.StepDone] != 1 || count[store.StepWaitingApproval] != 49 || h.sys.refunds != 1 {
		t.Fatalf("statuses %v, ledger entries %d; want 1 done, 49 waiting, 1 entry", count, h.sys.refunds)
	}
}

// Fifty copies of one step in one workflow make one ledger entry.
func TestConcurrentCopiesOfOneStep(t *testing.T) {
	h := newHarness(t, engine.DefaultControls())
	h.workflow("rep-ana", "W1")
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := h.eng.Propose(context.Background(), person("rep-ana"), "W1", tool.IssueRefund, json.RawMessage(`{"order":"O-1001","amount":3000}`)); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	_, steps, _ := h.eng.Workflow(context.Background(), person("rep-ana"), "W1")
	suppressed := 0
	for _, s := range steps {
		if s.Status == store.StepSuppressed && s.DuplicateOf == 1 {
			suppressed++
		}
	}
	if h.sys.refunds != 1 || suppressed != 49 {
		t.Fatalf("ledger entries %d, suppressed %d; want 1 and 49", h.sys.refunds, suppressed)
	}
}

func TestApprovalAuthority(t *testing.T) {
	h := newHarness(t, engine.DefaultControls())
	h.workflow("rep-ben", "W1")
	s := h.propose("rep-ben", "W1", tool.IssueRefund, `{"order":"O-1004","amount":40000}`)
	if s.Status != store.StepWaitingApproval {
		t.Fatalf("status %s", s.Status)
	}
	a, _ := h.eng.Approval(context.Background(), s.Approval)
	if want := "Refund $400.00 on order O-1004 for customer-4; requested by rep-ben; workflow W1"; a.Summary != want {
		t.Errorf("summary %q, want %q", a.Summary, want)
	}
	for _, tc := range []struct {
		who, code string
		after     time.Duration
	}{
		{"rep-ben", "requester_cannot_approve", 0},
		{"rep-cy", "forbidden_role", 0},
		{"lead-fay", "above_approver_limit", 0},
		{"lead-dee", "approver_outside_region", 0},
		{"lead-eli", "approval_expired", 1000 * time.Second},
	} {
		h.clock.Advance(tc.after)
		_, err := h.eng.Approve(context.Background(), person(tc.who), s.Approval, "")
		var refused *engine.ApprovalRefused
		if !errors.As(err, &refused) || refused.Code != tc.code {
			t.Errorf("approve as %s: %v, want %s", tc.who, err, tc.code)
		}
	}
	if h.sys.refunds != 0 {
		t.Fatalf("refunds executed: %d", h.sys.refunds)
	}
	a, _ = h.eng.Approval(context.Background(), s.Approval)
	if a.Status != store.ApprovalExpired {
		t.Errorf("approval status %s, want expired", a.Status)
	}
}

// A $120 approval cannot carry a step amended to $450; without the binding it does.
func TestApprovalBindsTheCall(t *testing.T) {
	for _, tc := range []struct {
		name    string
		bind    bool
		refunds int
	}{{"designed", true, 0}, {"bind_approval removed", false, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			c := engine.DefaultControls()
			c.BindApproval = tc.bind
			h := newHarness(t, c)
			h.workflow("rep-ana", "W1")
			s := h.propose("rep-ana", "W1", tool.IssueRefund, `{"order":"O-1002","amount":12000}`)
			if _, err := h.eng.Approve(context.Background(), person("lead-dee"), s.Approval, ""); err != nil {
				t.Fatal(err)
			}
			if _, err := h.eng.Amend(context.Background(), person("rep-ana"), "W1", 1, json.RawMessage(`{"order":"O-1002","amount":45000}`)); err != nil {
				t.Fatal(err)
			}
			snap, err := h.eng.Resume(context.Background(), person("rep-ana"), "W1")
			steps := snap.Steps
			if err != nil {
				t.Fatal(err)
			}
			if h.sys.refunds != tc.refunds {
				t.Fatalf("refunds %d, want %d (step %s, %s)", h.sys.refunds, tc.refunds, steps[0].Status, steps[0].Note)
			}
			if tc.bind {
				a, _ := h.eng.Approval(context.Background(), steps[0].Approval)
				if steps[0].Status != store.StepWaitingApproval || a.Status != store.ApprovalPending || a.ID == s.Approval || a.Args.Amount != 45000 {
					t.Fatalf("step %s approval %s %s %d", steps[0].Status, a.ID, a.Status, a.Args.Amount)
				}
			}
		})
	}
}

func TestApprovalAfterRestart(t *testing.T) {
	h := newHarness(t, engine.DefaultControls())
	h.workflow("rep-ana", "W1")
	s := h.propose("rep-ana", "W1", tool.IssueRefund, `{"order":"O-1002","amount":12000}`)
	h.open() // a new engine over the same file
	if _, err := h.eng.Approve(context.Background(), person("lead-dee"), s.Approval, "ok"); err != nil {
		t.Fatal(err)
	}
	h.open()
	for range 2 {
		if _, err := h.eng.Resume(context.Background(), person("rep-ana"), "W1"); err != nil {
			t.Fatal(err)
		}
	}
	_, steps, _ := h.eng.Workflow(context.Background(), person("rep-ana"), "W1")
	if h.sys.refunds != 1 || steps[0].Status != store.StepDone {
		t.Fatalf("refunds %d, step %s", h.sys.refunds, steps[0].Status)
	}
}

func TestCrashPointsResume(t *testing.T) {
	for _, tool_ := range []struct {
		name tool.Name
		args string
	}{{tool.IssueRefund, `{"order":"O-1001","amount":3000}`}, {tool.ReshipOrder, `{"order":"O-1001"}`}} {
		for _, point := range []string{"before_dispatch", "after_dispatch", "after_record"} {
			for _, writeAhead := range []bool{true, false} {
				t.Run(fmt.Sprintf("%s/%s/write_ahead=%v", tool_.name, point, writeAhead), func(t *testing.T) {
					c := engine.DefaultControls()
					c.WriteAhead = writeAhead
					h := newHarness(t, c)
					h.workflow("rep-ana", "W1")
					crash := point
					h.eng = engine.New(engine.Options{Store: h.db, Policy: h.pol, Systems: h.sys, Clock: h.clock, Controls: &c,
						Failpoint: func(p string) error {
							if p == crash {
								return engine.ErrCrashed
							}
							return nil
						}})
					if _, err := h.eng.Propose(context.Background(), person("rep-ana"), "W1", tool_.name, json.RawMessage(tool_.args)); !errors.Is(err, engine.ErrCrashed) {
						t.Fatalf("no crash: %v", err)
					}
					h.open()
					if err := h.eng.ResumeAll(context.Background()); err != nil {
						t.Fatal(err)
					}
					effects := h.sys.refunds + h.sys.shipments["O-1001"]
					want := 1
					if !writeAhead && tool_.name == tool.ReshipOrder && point == "after_dispatch" {
						want = 2
					}
					if effects != want {
						t.Fatalf("effects %d, want %d", effects, want)
					}
				})
			}
		}
	}
}

// A step amended into a call the workflow already made is suppressed, not
// dispatched under the other step's idempotency key.
func TestAmendIntoAnExistingCall(t *testing.T) {
	h := newHarness(t, engine.DefaultControls())
	h.workflow("rep-ana", "W1")
	h.propose("rep-ana", "W1", tool.IssueRefund, `{"order":"O-1001","amount":2000}`)
	s := h.propose("rep-ana", "W1", tool.IssueRefund, `{"order":"O-1002","amount":12000}`)
	amended, err := h.eng.Amend(context.Background(), person("rep-ana"), "W1", 2, json.RawMessage(`{"order":"O-1001","amount":2000}`))
	if err != nil || amended.Status != store.StepSuppressed || amended.DuplicateOf != 1 {
		t.Fatalf("amend: %s dup %d %v", amended.Status, amended.DuplicateOf, err)
	}
	if _, err := h.eng.Resume(context.Background(), person("rep-ana"), "W1"); err != nil {
		t.Fatal(err)
	}
	a, _ := h.eng.Approval(context.Background(), s.Approval)
	if h.sys.refunds != 1 || a.Status != store.ApprovalVoid {
		t.Fatalf("refunds %d, old approval %s", h.sys.refunds, a.Status)
	}
	h.db.View(func(tx *store.Tx) error {
		if got := tx.OrderSpent("O-1001"); got != 2000 {
			t.Errorf("O-1001 spent %v, want $20.00", got)
		}
		return nil
	})
}

// A call a lead approved, then allowed outright by a later bundle, runs with
// that approval: it is used, never left standing as approved.
func TestApprovalUsedWhenPolicyLaterAllows(t *testing.T) {
	h := newHarness(t, engine.DefaultControls())
	h.workflow("rep-ana", "W1")
	s := h.propose("rep-ana", "W1", tool.IssueRefund, `{"order":"O-1002","amount":12000}`)
	if _, err := h.eng.Approve(context.Background(), person("lead-dee"), s.Approval, ""); err != nil {
		t.Fatal(err)
	}
	p2, err := bundles.Open("p2")
	if err != nil {
		t.Fatal(err)
	}
	b, err := policy.LoadFS(p2)
	if err != nil {
		t.Fatal(err)
	}
	h.pol.Restore(b) // p2 allows $120 without approval
	snap, err := h.eng.Resume(context.Background(), person("rep-ana"), "W1")
	steps := snap.Steps
	if err != nil {
		t.Fatal(err)
	}
	a, _ := h.eng.Approval(context.Background(), s.Approval)
	if steps[0].Status != store.StepDone || steps[0].Decision != "ALLOW" || a.Status != store.ApprovalUsed {
		t.Fatalf("step %s %s, approval %s", steps[0].Status, steps[0].Decision, a.Status)
	}
}
