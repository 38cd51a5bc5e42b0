package demo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

// ApprovalAttempt is one person trying to approve.
type ApprovalAttempt struct {
	Approver string `json:"approver"`
	// AfterSeconds is how far the simulated clock moved before the attempt.
	AfterSeconds int `json:"after_seconds,omitempty"`
	// Outcome is "approved" or the refusal's code.
	Outcome string `json:"outcome"`
	// Want is the outcome the approver rules must give.
	Want string `json:"want"`
}

// ApprovalAuthority is section 2: a $400 refund that five people try, and
// fail, to approve.
type ApprovalAuthority struct {
	Workflow string      `json:"workflow"`
	Rep      string      `json:"rep"`
	Order    string      `json:"order"`
	Amount   money.Cents `json:"amount"`
	Approval string      `json:"approval"`
	// Summary is what an approver is shown, built by the engine.
	Summary  string            `json:"summary"`
	Attempts []ApprovalAttempt `json:"attempts"`
	// ApprovalStatus is the approval's status after the attempts.
	ApprovalStatus store.ApprovalStatus `json:"approval_status"`
	// RefundsExecuted is counted in the ledger after the workflow was
	// resumed once more.
	RefundsExecuted int `json:"refunds_executed"`
}

// Held reports whether every attempt was refused with the code the rules
// give and no refund reached the ledger.
func (a ApprovalAuthority) Held() bool {
	for _, at := range a.Attempts {
		if at.Outcome != at.Want {
			return false
		}
	}
	return len(a.Attempts) > 0 && a.RefundsExecuted == 0
}

var authorityAttempts = []struct {
	who   string
	after time.Duration
	want  string
}{
	{"rep-ben", 0, "requester_cannot_approve"},
	{"rep-cy", 0, "forbidden_role"},
	{"lead-fay", 0, "above_approver_limit"},
	{"lead-dee", 0, "approver_outside_region"},
	{"lead-eli", 1000 * time.Second, "approval_expired"},
}

// RunApprovalAuthority asks for $400 on O-1004 for rep-ben and lets each
// wrong approver try; the right lead tries after 1000 simulated seconds.
func RunApprovalAuthority(ctx context.Context, dir string, c engine.Controls) (ApprovalAuthority, error) {
	out := ApprovalAuthority{Workflow: "W1", Rep: "rep-ben", Order: "O-1004", Amount: 40000}
	st, err := start(ctx, dir, setup{controls: c})
	if err != nil {
		return out, err
	}
	defer st.Close()
	if err := st.open(ctx, out.Rep, out.Workflow); err != nil {
		return out, err
	}
	s, err := st.propose(ctx, out.Rep, out.Workflow, tool.IssueRefund, refundArgs(out.Order, out.Amount))
	if err != nil {
		return out, err
	}
	if s.Approval == "" {
		return out, fmt.Errorf("the $400 refund is %s (%s), not waiting for an approval", s.Status, s.Rule)
	}
	a, err := st.Engine.Approval(ctx, s.Approval)
	if err != nil {
		return out, err
	}
	out.Approval, out.Summary = a.ID, a.Summary
	for _, at := range authorityAttempts {
		st.clock.Advance(at.after)
		outcome := "approved"
		_, err := st.Engine.Approve(ctx, person(at.who), a.ID, "")
		var refused *engine.ApprovalRefused
		switch {
		case errors.As(err, &refused):
			outcome = refused.Code
		case err != nil:
			return out, fmt.Errorf("approve as %s: %w", at.who, err)
		}
		out.Attempts = append(out.Attempts, ApprovalAttempt{Approver: at.who, AfterSeconds: int(at.after / time.Second), Outcome: outcome, Want: at.want})
	}
	if a, err = st.Engine.Approval(ctx, a.ID); err != nil {
		return out, err
	}
	out.ApprovalStatus = a.Status
	// The agent resumes: whatever the attempts left must not pay.
	if _, err := st.Engine.Resume(ctx, person(out.Rep), out.Workflow); err != nil {
		return out, fmt.Errorf("resume %s: %w", out.Workflow, err)
	}
	refunds, err := st.refunds()
	out.RefundsExecuted = len(refunds)
	return out, err
}

// Binding is section 3: an approval for $120, a plan amended to $450, and
// what running the amended step does.
type Binding struct {
	Workflow string      `json:"workflow"`
	Order    string      `json:"order"`
	Approved money.Cents `json:"approved"`
	Amended  money.Cents `json:"amended"`
	// FirstApproval is the lead's approval of the $120 call and
	// ApproveOutcome what approving it answered.
	FirstApproval  string `json:"first_approval"`
	ApproveOutcome string `json:"approve_outcome"`
	// FirstApprovalStatus is that approval's status after the resume:
	// void when the binding held, used when it carried the amended call.
	FirstApprovalStatus store.ApprovalStatus `json:"first_approval_status"`
	StepStatus          store.StepStatus     `json:"step_status"`
	// Refunds and Refunded are counted in the ledger.
	Refunds  int         `json:"refunds"`
	Refunded money.Cents `json:"refunded"`
	// NewApproval is the approval requested for the amended call, if any.
	NewApproval       string               `json:"new_approval,omitempty"`
	NewApprovalStatus store.ApprovalStatus `json:"new_approval_status,omitempty"`
	NewApprovalAmount money.Cents          `json:"new_approval_amount,omitempty"`
}

// RunBinding has lead-dee approve $120 on O-1002 for rep-ana, amends the
// step to $450 and resumes it.
func RunBinding(ctx context.Context, dir string, c engine.Controls) (Binding, error) {
	out := Binding{Workflow: "W1", Order: "O-1002", Approved: 12000, Amended: 45000}
	st, err := start(ctx, dir, setup{controls: c})
	if err != nil {
		return out, err
	}
	defer st.Close()
	if err := st.open(ctx, "rep-ana", out.Workflow); err != nil {
		return out, err
	}
	s, err := st.propose(ctx, "rep-ana", out.Workflow, tool.IssueRefund, refundArgs(out.Order, out.Approved))
	if err != nil {
		return out, err
	}
	if s.Approval == "" {
		return out, fmt.Errorf("the $120 refund is %s, not waiting for an approval", s.Status)
	}
	out.FirstApproval = s.Approval
	a, err := st.Engine.Approve(ctx, person("lead-dee"), s.Approval, "damaged item")
	if err != nil {
		return out, fmt.Errorf("lead-dee approves %s: %w", s.Approval, err)
	}
	out.ApproveOutcome = string(a.Status)
	if _, err := st.Engine.Amend(ctx, person("rep-ana"), out.Workflow, s.N, refundArgs(out.Order, out.Amended)); err != nil {
		return out, err
	}
	snap, err := st.Engine.Resume(ctx, person("rep-ana"), out.Workflow)
	steps := snap.Steps
	if err != nil {
		return out, fmt.Errorf("resume %s: %w", out.Workflow, err)
	}
	last := steps[s.N-1]
	out.StepStatus = last.Status
	first, err := st.Engine.Approval(ctx, out.FirstApproval)
	if err != nil {
		return out, err
	}
	out.FirstApprovalStatus = first.Status
	if last.Approval != "" && last.Approval != out.FirstApproval {
		na, err := st.Engine.Approval(ctx, last.Approval)
		if err != nil {
			return out, err
		}
		out.NewApproval, out.NewApprovalStatus, out.NewApprovalAmount = na.ID, na.Status, na.Args.Amount
	}
	refunds, err := st.refunds()
	for _, e := range refunds {
		out.Refunds++
		out.Refunded += money.Cents(e.Amount)
	}
	return out, err
}
