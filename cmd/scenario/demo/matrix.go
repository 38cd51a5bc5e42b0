package demo

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/sim/ledger"
	"github.com/countersign/countersign/executor/sim/orders"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

// autoLimit is the company's auto limit ($50.00, as in bundle p1's data),
// the yardstick of the split-refund invariant. It is not read from the active bundle, whose
// data is what a removed control or a bad release would get wrong.
const autoLimit money.Cents = 5000

// Outcome is one run of a check: whether its invariant held, and what the
// systems of record showed.
type Outcome struct {
	Pass     bool   `json:"pass"`
	Evidence string `json:"evidence"`
}

// Scenario runs a check on a fresh stack in dir under controls c. An error
// means the scenario could not run, never that the invariant broke.
type Scenario func(ctx context.Context, dir string, c engine.Controls) (Outcome, error)

// Check is one row of the control-removal matrix.
type Check struct {
	Test string
	// Removes are the controls removed together for the "control removed"
	// run; empty for a row with no switch (n/a).
	Removes []Control
	// Layers are controls that back each other up: removed one at a time,
	// the check must still pass.
	Layers []Control
	Run    Scenario
}

// Checks returns the matrix's rows in the order they are printed.
func Checks() []Check {
	return []Check{
		{Test: "lost response, retried", Removes: []Control{IdempotencyKeys}, Run: lostResponse},
		{Test: "model repeats the same call", Removes: []Control{RunDedupe, IdempotencyKeys},
			Layers: []Control{RunDedupe, IdempotencyKeys}, Run: repeatedCall},
		{Test: "crash at each point, then resume", Removes: []Control{WriteAhead, ReferenceKeys},
			Layers: []Control{WriteAhead, ReferenceKeys}, Run: crashEveryPoint},
		{Test: "approval arrives after a restart", Run: approvalAfterRestart},
		{Test: "plan amended after approval", Removes: []Control{BindApproval}, Run: amendedAfterApproval},
		{Test: "refunds split to stay under the threshold", Removes: []Control{Cumulative}, Run: splitRefunds},
		{Test: "approval claimed in tool arguments", Removes: []Control{StrictSchema}, Run: claimedApproval},
		{Test: "policy bug, token ceiling holds", Removes: []Control{DownstreamCeiling}, Run: tokenCeiling},
		{Test: "tool switched off mid-run", Removes: []Control{CheckSwitchAtExecution}, Run: switchedOffMidRun},
		{Test: "approver authority rules", Run: approverRules},
		{Test: "captured reship token replayed", Removes: []Control{SingleUseTokens, ReferenceKeys},
			Layers: []Control{SingleUseTokens, ReferenceKeys}, Run: replayedToken},
		{Test: "one order reshipped in four workflows", Removes: []Control{ReshipHistory}, Run: reshipAcrossWorkflows},
		{Test: "narrower token in an older workflow", Removes: []Control{NarrowDelegation}, Run: narrowedToken},
		{Test: "unknown reship, another workflow ships", Removes: []Control{ResolveByReference}, Run: unknownReshipCredit},
		{Test: "bundle reaches the network and clock", Removes: []Control{RestrictedBuiltins}, Run: outsideBundle},
		{Test: "agent version keeps proposing bad refunds", Removes: []Control{Breaker}, Run: failingAgent},
		{Test: "line-item pricing", Removes: []Control{LinePricing}, Run: linePricing},
		{Test: "approval role floor", Removes: []Control{ApprovalRoleFloor}, Run: approvalRoleFloor},
		{Test: "paused holder's refund, survivor's 503", Removes: []Control{EffectFence}, Run: pausedHolderRefund},
		{Test: "paused holder writes after the takeover", Removes: []Control{LeaseFencing}, Run: pausedHolderLateWrite},
		{Test: "two people for any loosening", Removes: []Control{TwoPersonLoosening}, Run: oneOperatorLoosening},
	}
}

// lostResponse: the ledger commits a $30 refund and the answer is lost;
// dispatch retries once. Invariant: one ledger entry.
func lostResponse(ctx context.Context, dir string, c engine.Controls) (Outcome, error) {
	st, err := start(ctx, dir, setup{controls: c})
	if err != nil {
		return Outcome{}, err
	}
	defer st.Close()
	if err := st.Ledger.SetFaults(ledger.Faults{LoseResponse: 1}); err != nil {
		return Outcome{}, err
	}
	if err := st.open(ctx, "rep-ana", "W1"); err != nil {
		return Outcome{}, err
	}
	s, err := st.propose(ctx, "rep-ana", "W1", tool.IssueRefund, refundArgs("O-1001", 3000))
	if err != nil {
		return Outcome{}, err
	}
	refunds, err := st.refunds()
	if err != nil {
		return Outcome{}, err
	}
	keys := map[string]bool{}
	for _, e := range refunds {
		keys[e.Key] = true
	}
	return Outcome{Pass: len(refunds) == 1,
		Evidence: fmt.Sprintf("%s under %s; step %s", plural(len(refunds), "ledger entry", "ledger entries"), plural(len(keys), "key", "keys"), s.Status)}, nil
}

// repeatedCall: the model proposes the same $20 refund twice in one
// workflow. Invariant: one ledger entry.
func repeatedCall(ctx context.Context, dir string, c engine.Controls) (Outcome, error) {
	st, err := start(ctx, dir, setup{controls: c})
	if err != nil {
		return Outcome{}, err
	}
	defer st.Close()
	if err := st.open(ctx, "rep-ana", "W1"); err != nil {
		return Outcome{}, err
	}
	var second store.Step
	for range 2 {
		if second, err = st.propose(ctx, "rep-ana", "W1", tool.IssueRefund, refundArgs("O-1001", 2000)); err != nil {
			return Outcome{}, err
		}
	}
	refunds, err := st.refunds()
	if err != nil {
		return Outcome{}, err
	}
	how := "step 2 " + string(second.Status)
	if second.Status == store.StepDone && len(refunds) == 1 {
		how = "step 2 done on the ledger's replay of its key"
	}
	return Outcome{Pass: len(refunds) == 1, Evidence: plural(len(refunds), "ledger entry", "ledger entries") + "; " + how}, nil
}

// crashEveryPoint crashes a refund and a reshipment at every point and
// resumes each on a new stack. Invariant: one effect in every cell.
func crashEveryPoint(ctx context.Context, dir string, c engine.Controls) (Outcome, error) {
	cells, err := crashColumn(ctx, dir, c, 3)
	if err != nil {
		return Outcome{}, err
	}
	var bad []string
	for i, cell := range cells {
		if cell.Effects != 1 {
			step, point := crashSteps[i/len(CrashPoints())], CrashPoints()[i%len(CrashPoints())]
			bad = append(bad, fmt.Sprintf("%d %ss after a crash at %s", cell.Effects, step.label, point))
		}
	}
	if len(bad) > 0 {
		return Outcome{Evidence: strings.Join(bad, "; ")}, nil
	}
	return Outcome{Pass: true, Evidence: fmt.Sprintf("1 effect in each of the %d crash cells", len(cells))}, nil
}

// approvalAfterRestart: a $120 refund waits for a lead; the stack is
// restarted before the lead approves and again before the agent resumes.
// Invariant: exactly one refund, after the approval.
func approvalAfterRestart(ctx context.Context, dir string, c engine.Controls) (Outcome, error) {
	clock := newClock()
	run := func(do func(st *stack) error) error {
		st, err := start(ctx, dir, setup{controls: c, clock: clock})
		if err != nil {
			return err
		}
		defer st.Close()
		return do(st)
	}
	var approval string
	var refundsBefore int
	err := run(func(st *stack) error {
		if err := st.open(ctx, "rep-ana", "W1"); err != nil {
			return err
		}
		s, err := st.propose(ctx, "rep-ana", "W1", tool.IssueRefund, refundArgs("O-1002", 12000))
		approval = s.Approval
		return err
	})
	if err != nil {
		return Outcome{}, err
	}
	if err := run(func(st *stack) error {
		r, err := st.refunds()
		refundsBefore = len(r)
		if err != nil {
			return err
		}
		_, err = st.Engine.Approve(ctx, person("lead-dee"), approval, "")
		return err
	}); err != nil {
		return Outcome{}, err
	}
	var out Outcome
	err = run(func(st *stack) error {
		snap, err := st.Engine.Resume(ctx, person("rep-ana"), "W1")
		steps := snap.Steps
		if err != nil {
			return err
		}
		refunds, err := st.refunds()
		out.Pass = refundsBefore == 0 && len(refunds) == 1 && steps[0].Status == store.StepDone
		out.Evidence = fmt.Sprintf("%s after two restarts; step %s", plural(len(refunds), "refund", "refunds"), steps[0].Status)
		return err
	})
	return out, err
}

// amendedAfterApproval: section 3's run. Invariant: nothing is refunded
// that a lead did not approve.
func amendedAfterApproval(ctx context.Context, dir string, c engine.Controls) (Outcome, error) {
	b, err := RunBinding(ctx, dir, c)
	if err != nil {
		return Outcome{}, err
	}
	if b.Refunds > 0 {
		return Outcome{Evidence: fmt.Sprintf("%s refunded on the %s approval", b.Refunded, b.Approved)}, nil
	}
	return Outcome{Pass: true, Evidence: fmt.Sprintf("0 refunds; step %s on new approval %s", b.StepStatus, b.NewApproval)}, nil
}

// splitRefunds: four $49 refunds on O-1002, one per workflow, none
// approved. Invariant: what executes without an approval on one order
// stays within the $50 auto limit.
func splitRefunds(ctx context.Context, dir string, c engine.Controls) (Outcome, error) {
	st, err := start(ctx, dir, setup{controls: c})
	if err != nil {
		return Outcome{}, err
	}
	defer st.Close()
	for i := range 4 {
		wf := fmt.Sprintf("S%d", i+1)
		if err := st.open(ctx, "rep-ana", wf); err != nil {
			return Outcome{}, err
		}
		if _, err := st.propose(ctx, "rep-ana", wf, tool.IssueRefund, refundArgs("O-1002", 4900)); err != nil {
			return Outcome{}, err
		}
	}
	refunds, err := st.refunds()
	if err != nil {
		return Outcome{}, err
	}
	var total money.Cents
	for _, e := range refunds {
		total += money.Cents(e.Amount)
	}
	return Outcome{Pass: total <= autoLimit,
		Evidence: fmt.Sprintf("%d of 4 refunds executed unapproved (%s)", len(refunds), total)}, nil
}

// claimedApproval: over the sidecar's API, the agent sends a $120 refund
// with an approved_by of its own. Invariant: nothing executes.
func claimedApproval(ctx context.Context, dir string, c engine.Controls) (Outcome, error) {
	st, err := start(ctx, dir, setup{controls: c})
	if err != nil {
		return Outcome{}, err
	}
	defer st.Close()
	if code, body, err := st.post(ctx, "rep-ana", "/v1/workflows", map[string]string{"id": "W1", "ticket": "T-W1"}); err != nil {
		return Outcome{}, err
	} else if code != http.StatusCreated {
		return Outcome{}, fmt.Errorf("create W1: %d %s", code, body)
	}
	code, body, err := st.post(ctx, "rep-ana", "/v1/workflows/W1/steps", map[string]any{
		"tool": "issue_refund", "args": map[string]any{"order": "O-1001", "amount": 12000, "approved_by": "lead-dee"},
	})
	if err != nil {
		return Outcome{}, err
	}
	refunds, err := st.refunds()
	if err != nil {
		return Outcome{}, err
	}
	answer := fmt.Sprint(code)
	if ec := errorCode(body); ec != "" {
		answer += " " + ec
	} else if st := stepStatus(body); st != "" {
		answer += ", step " + st
	}
	return Outcome{Pass: len(refunds) == 0,
		Evidence: fmt.Sprintf("HTTP %s; %s", answer, plural(len(refunds), "ledger entry", "ledger entries"))}, nil
}

// tokenCeiling: bundle p2 (limits a hundred times too large) is released
// by break glass and rep-ana asks for $700 on an order paid $900.
// Invariant: no ledger entry exceeds the rep's $500 delegation.
func tokenCeiling(ctx context.Context, dir string, c engine.Controls) (Outcome, error) {
	st, err := start(ctx, dir, setup{controls: c})
	if err != nil {
		return Outcome{}, err
	}
	defer st.Close()
	rep := person("rep-ana")
	if _, err := st.Orders.PutOrder(orders.Order{ID: "O-1006", Region: rep.Region, Customer: "customer-6", Paid: 90000, Status: "shipped"}); err != nil {
		return Outcome{}, err
	}
	p2, err := LoadBundle("p2")
	if err != nil {
		return Outcome{}, err
	}
	if _, err := st.Releases.ActivateBundle(ctx, p2, policy.Activation{By: "ops-jon", Proposer: "ops-ida", BreakGlass: true, Reason: "demo: p2 without its gate"}); err != nil {
		return Outcome{}, err
	}
	if err := st.open(ctx, rep.ID, "W1"); err != nil {
		return Outcome{}, err
	}
	s, err := st.propose(ctx, rep.ID, "W1", tool.IssueRefund, refundArgs("O-1006", 70000))
	if err != nil {
		return Outcome{}, err
	}
	refunds, err := st.refunds()
	if err != nil {
		return Outcome{}, err
	}
	over := 0
	for _, e := range refunds {
		if money.Cents(e.Amount) > rep.RefundCeiling {
			over++
		}
	}
	ev := fmt.Sprintf("policy %s; step %s", s.Decision, s.Status)
	if s.Status == store.StepDenied {
		ev += " (ledger refused: " + s.Refusal + ")"
	}
	ev += "; " + plural(over, "ledger entry", "ledger entries") + " over " + rep.RefundCeiling.String()
	return Outcome{Pass: over == 0, Evidence: ev}, nil
}

// switchedOffMidRun: a $120 refund waits for approval; an operator
// switches issue_refund off; the lead approves and the agent resumes.
// Invariant: no refund executes while the tool is off.
func switchedOffMidRun(ctx context.Context, dir string, c engine.Controls) (Outcome, error) {
	st, err := start(ctx, dir, setup{controls: c})
	if err != nil {
		return Outcome{}, err
	}
	defer st.Close()
	if err := st.open(ctx, "rep-ana", "W1"); err != nil {
		return Outcome{}, err
	}
	s, err := st.propose(ctx, "rep-ana", "W1", tool.IssueRefund, refundArgs("O-1002", 12000))
	if err != nil {
		return Outcome{}, err
	}
	if err := st.Engine.SetSwitch(ctx, person("ops-ida"), tool.IssueRefund, false, ""); err != nil {
		return Outcome{}, err
	}
	if _, err := st.Engine.Approve(ctx, person("lead-dee"), s.Approval, ""); err != nil {
		return Outcome{}, err
	}
	snap, err := st.Engine.Resume(ctx, person("rep-ana"), "W1")
	steps := snap.Steps
	if err != nil {
		return Outcome{}, err
	}
	refunds, err := st.refunds()
	if err != nil {
		return Outcome{}, err
	}
	return Outcome{Pass: len(refunds) == 0,
		Evidence: fmt.Sprintf("step %s; %s with the tool off", steps[0].Status, plural(len(refunds), "refund", "refunds"))}, nil
}

// approverRules: section 2's run. Invariant: each wrong approver is
// refused by its own rule and nothing is refunded.
func approverRules(ctx context.Context, dir string, c engine.Controls) (Outcome, error) {
	a, err := RunApprovalAuthority(ctx, dir, c)
	if err != nil {
		return Outcome{}, err
	}
	right := 0
	for _, at := range a.Attempts {
		if at.Outcome == at.Want {
			right++
		}
	}
	return Outcome{Pass: a.Held(),
		Evidence: fmt.Sprintf("%d of %d refused by the right rule; %s", right, len(a.Attempts), plural(a.RefundsExecuted, "refund", "refunds"))}, nil
}

// Row is one check run on the designed system and with its controls
// removed.
type Row struct {
	Test     string  `json:"test"`
	Designed Outcome `json:"designed"`
	// Removed is nil for a row with no switch to remove (n/a).
	Removed         *Outcome  `json:"removed"`
	RemovedControls []Control `json:"removed_controls"`
}

// Layer is a check run with one of its layered controls removed alone.
type Layer struct {
	Test    string  `json:"test"`
	Removed Control `json:"removed"`
	Outcome Outcome `json:"outcome"`
}

// Matrix is the control-removal matrix and its layering lines.
type Matrix struct {
	Rows     []Row   `json:"rows"`
	Layering []Layer `json:"layering"`
}

// Problems lists everything that makes the matrix dishonest: a check that
// fails on the designed system, a removal that goes undetected, a layer
// that does not hold alone. Empty means every control proved load-bearing.
func (m Matrix) Problems() []string {
	var out []string
	for _, r := range m.Rows {
		if !r.Designed.Pass {
			out = append(out, fmt.Sprintf("%s: fails on the designed system (%s)", r.Test, r.Designed.Evidence))
		}
		if r.Removed != nil && r.Removed.Pass {
			out = append(out, fmt.Sprintf("%s: still passes with %s, so the test does not detect the removal (%s)",
				r.Test, removedLabel(r.RemovedControls), r.Removed.Evidence))
		}
	}
	for _, l := range m.Layering {
		if !l.Outcome.Pass {
			out = append(out, fmt.Sprintf("%s: fails with only %s removed (%s)", l.Test, l.Removed, l.Outcome.Evidence))
		}
	}
	return out
}

// RunControls runs every check on the designed system, with its controls
// removed, and with each layered control removed alone; every run has its
// own directory under dir, at most parallel at once.
func RunControls(ctx context.Context, dir string, parallel int) (Matrix, error) {
	checks := Checks()
	m := Matrix{Rows: make([]Row, len(checks))}
	var jobs []func(context.Context) error
	run := func(c Check, controls engine.Controls, into *Outcome) {
		jobs = append(jobs, func(ctx context.Context) error {
			d, err := subdir(dir, "controls")
			if err != nil {
				return err
			}
			if *into, err = c.Run(ctx, d, controls); err != nil {
				return fmt.Errorf("%s: %w", c.Test, err)
			}
			return nil
		})
	}
	for i, c := range checks {
		m.Rows[i] = Row{Test: c.Test, RemovedControls: c.Removes}
		run(c, engine.DefaultControls(), &m.Rows[i].Designed)
		if len(c.Removes) > 0 {
			m.Rows[i].Removed = &Outcome{}
			run(c, Without(c.Removes...), m.Rows[i].Removed)
		}
		for _, l := range c.Layers {
			m.Layering = append(m.Layering, Layer{Test: c.Test, Removed: l})
		}
	}
	li := 0
	for _, c := range checks {
		for _, l := range c.Layers {
			run(c, Without(l), &m.Layering[li].Outcome)
			li++
		}
	}
	return m, runJobs(ctx, parallel, jobs)
}
