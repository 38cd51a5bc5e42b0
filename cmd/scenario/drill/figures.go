package drill

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/reconcile"
	"github.com/countersign/countersign/executor/sim/ledger"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

// autoLimit is the designed auto limit the figures judge refunds by, the
// same that the monitor and reconciliation use, never a bundle's.
const autoLimit = reconcile.DefaultAutoLimit

// ceilingRefusal is the ledger's code for an amount above the token's
// ceiling, as recorded on a refused step.
const ceilingRefusal = "amount_above_max"

type stepKey struct {
	wf string
	n  int
}

func keyOf(s store.Step) stepKey { return stepKey{s.Workflow, s.N} }

// snapshot is the agent's records at one moment.
type snapshot struct {
	steps     []store.Step // by workflow, then n
	workflows map[string]store.Workflow
	approvals map[stepKey][]store.Approval
	last      map[stepKey]store.Decision // the last decision of each step
}

func (r *run) snapshot() (snapshot, error) {
	s := snapshot{workflows: map[string]store.Workflow{}, approvals: map[stepKey][]store.Approval{}, last: map[stepKey]store.Decision{}}
	err := r.st.Store.View(func(tx *store.Tx) error {
		if err := tx.AllSteps(func(st store.Step) error { s.steps = append(s.steps, st); return nil }); err != nil {
			return err
		}
		ws, err := tx.Workflows(nil)
		if err != nil {
			return err
		}
		for _, w := range ws {
			s.workflows[w.ID] = w
		}
		as, err := tx.Approvals(nil)
		if err != nil {
			return err
		}
		for _, a := range as {
			k := stepKey{a.Workflow, a.N}
			s.approvals[k] = append(s.approvals[k], a)
		}
		ds, err := tx.Decisions("")
		if err != nil {
			return err
		}
		for _, d := range ds { // in sequence: the last one wins
			s.last[stepKey{d.Workflow, d.N}] = d
		}
		return nil
	})
	slices.SortFunc(s.steps, func(a, b store.Step) int {
		return cmp.Or(cmp.Compare(a.Workflow, b.Workflow), cmp.Compare(a.N, b.N))
	})
	return s, err
}

// approvedBefore reports whether s ran with a used approval, given before
// the effect, that names exactly its call.
func (sn snapshot) approvedBefore(s store.Step) bool {
	for _, a := range sn.approvals[keyOf(s)] {
		if !a.Retroactive && a.Status == store.ApprovalUsed && a.CallHash == engine.Binding(s.Workflow, s.Tool, s.Args) {
			return true
		}
	}
	return false
}

func executed(s store.Step) bool {
	return s.Status == store.StepDone || s.Status == store.StepCompensated
}

// violation is an executed refund above the auto limit without a used
// approval given before it ran.
func (sn snapshot) violation(s store.Step) bool {
	return s.Tool == tool.IssueRefund && executed(s) && s.Args.Amount > autoLimit && !sn.approvedBefore(s)
}

// afterTraffic computes the figures, runs the worklist and its
// remediation, reconciles again and checks the invariants.
func (r *run) afterTraffic(ctx context.Context) error {
	sn, err := r.snapshot()
	if err != nil {
		return err
	}
	r.report.Traffic = r.trafficFigures(sn)
	r.report.Paused = r.pausedFigures(sn)
	r.report.Policies = policyTable(sn)

	found, err := r.st.Reconcile.Run(ctx)
	if err != nil {
		return err
	}
	if err := r.remediate(ctx, sn, found.Findings.RefundOverLimitWithoutApproval); err != nil {
		return err
	}
	after, err := r.st.Reconcile.Run(ctx)
	if err != nil {
		return err
	}
	r.report.After = Reconciliation{Classes: after.Classes, Unexplained: after.Unexplained, Explained: after.Explained}
	r.report.SinceFix = sinceFix(sn)
	for _, n := range []int{r.report.SinceFix.WithUsedApproval, 300, 1000} {
		r.report.Bounds = append(r.report.Bounds, Bound{N: n, Bound: upperBound(n)})
	}
	inv, err := r.invariants(sn)
	if err != nil {
		return err
	}
	inv.Unexplained = after.Unexplained
	r.report.Invariants = inv
	return nil
}

func (r *run) trafficFigures(sn snapshot) Traffic {
	t := Traffic{Minutes: int(duration / time.Minute), Tickets: len(r.tickets), ByRep: map[string]int{},
		RepDaily: drillRepDaily, AgentHourly: drillAgentHourly, Ended: map[string]int{}}
	for _, tk := range r.tickets {
		t.ByRep[tk.Rep]++
		switch tk.Class {
		case classSmall:
			t.Small++
		case classMid:
			t.Mid++
		default:
			t.High++
		}
		if tk.Reship {
			t.Reships++
		}
	}
	for _, w := range sn.workflows {
		t.Ended[string(w.Status)]++
	}
	return t
}

func (r *run) pausedFigures(sn snapshot) Paused {
	p := Paused{Count: len(r.pausedAtFix), Ended: map[string]int{}, Workflows: []PausedWorkflow{}}
	for _, id := range r.pausedAtFix {
		w := sn.workflows[id]
		t := r.byWorkflow[id]
		pw := PausedWorkflow{Workflow: id, Rep: w.User, Ended: string(w.Status)}
		if t != nil {
			pw.Refund, pw.Reship = t.Amount, t.Reship
		}
		if w.Status == store.WorkflowFailed {
			for _, s := range sn.steps {
				if s.Workflow == id && s.Status == store.StepDenied {
					pw.Rule = s.Rule
					if s.Refusal == ceilingRefusal {
						pw.Rule = "ledger: amount_above_max"
					}
					break
				}
			}
		}
		p.Ended[pw.Ended]++
		p.Workflows = append(p.Workflows, pw)
	}
	return p
}

// policyTable attributes each refund step to the revision of its last
// decision and counts what became of it.
func policyTable(sn snapshot) []PolicyRow {
	rows := map[string]*PolicyRow{}
	revs := []string{"p1", "p2", "p3"}
	for _, rev := range revs {
		rows[rev] = &PolicyRow{Revision: rev, DeniedBy: map[string]int{}}
	}
	for _, s := range sn.steps {
		if s.Tool != tool.IssueRefund {
			continue
		}
		d, ok := sn.last[keyOf(s)]
		rev := d.Revision
		if !ok {
			rev = "undecided"
		}
		row := rows[rev]
		if row == nil {
			row = &PolicyRow{Revision: rev, DeniedBy: map[string]int{}}
			rows[rev] = row
			revs = append(revs, rev)
		}
		row.RefundSteps++
		switch {
		case executed(s):
			row.Executed++
			if sn.violation(s) {
				row.Violations++
				row.ViolationTotal += s.Args.Amount
			}
		case s.Status == store.StepDenied && s.Refusal == ceilingRefusal:
			row.BlockedByCeiling++
		case s.Status == store.StepDenied && d.Decision == "DENY":
			row.DeniedByPolicy++
			row.DeniedBy[d.Rule]++
		case s.Status == store.StepWaitingApproval:
			row.Waiting++
		}
	}
	slices.Sort(revs[3:])
	out := make([]PolicyRow, 0, len(revs))
	for _, rev := range revs {
		out = append(out, *rows[rev])
	}
	return out
}

// remediate has a lead review every worklist item: ratify a damaged-goods
// refund (the ticket also had a reshipment); reverse the others.
func (r *run) remediate(ctx context.Context, sn snapshot, items []reconcile.OverLimit) error {
	wl := Worklist{Count: len(items), ByRep: map[string]int{}, Items: []WorkItem{}}
	for i, it := range items {
		m := r.minutes(it.At.Sub(start))
		if i == 0 || m < wl.FirstMinute {
			wl.FirstMinute = m
		}
		if i == 0 || m > wl.LastMinute {
			wl.LastMinute = m
		}
		wl.Count, wl.Total = len(items), wl.Total+it.Amount
		wl.ByRep[it.Rep]++
		w := sn.workflows[it.Workflow]
		lead, ok := r.leadFor(w.Delegation.Region, it.Amount)
		if !ok {
			return fmt.Errorf("drill: no lead of %s may review %s/%d (%s)", w.Delegation.Region, it.Workflow, it.N, it.Amount)
		}
		item := WorkItem{Workflow: it.Workflow, N: it.N, Rep: it.Rep, Order: it.Order, Amount: it.Amount,
			Minute: m, Entry: it.Entry, By: lead.ID}
		t := r.byWorkflow[it.Workflow]
		if t != nil && t.Reship {
			item.Action, item.Reason = ActionRatify, "damaged goods: the same ticket shipped a replacement"
		} else {
			item.Action, item.Reason = ActionReverse, "no approval and no damaged-goods case"
		}
		var err error
		if item.Action == ActionRatify {
			_, err = r.st.Engine.Ratify(ctx, lead, it.Workflow, it.N, item.Reason)
			r.report.Remediation.Ratified++
			r.report.Remediation.RatifiedTotal += it.Amount
		} else {
			_, err = r.st.Engine.Reverse(ctx, lead, it.Workflow, it.N, item.Reason)
			r.report.Remediation.Reversed++
			r.report.Remediation.ToRecover += it.Amount
		}
		if err != nil {
			return fmt.Errorf("drill: %s %s/%d: %w", item.Action, it.Workflow, it.N, err)
		}
		wl.Items = append(wl.Items, item)
	}
	entries, err := r.st.Ledger.Entries()
	if err != nil {
		return err
	}
	reversal := map[string]string{}
	for _, e := range entries {
		if e.Kind == ledger.KindReversal {
			reversal[e.Reverses] = e.ID
		}
	}
	for i := range wl.Items {
		if wl.Items[i].Action == ActionReverse {
			wl.Items[i].Reversal = reversal[wl.Items[i].Entry]
		}
	}
	r.report.Worklist = wl
	return nil
}

// sinceFix is the evidence for p3: the refunds decided under it.
func sinceFix(sn snapshot) SinceFix {
	out := SinceFix{Revision: "p3"}
	for _, s := range sn.steps {
		if s.Tool != tool.IssueRefund || !executed(s) || sn.last[keyOf(s)].Revision != out.Revision {
			continue
		}
		out.Executed++
		switch {
		case s.Args.Amount <= autoLimit:
			out.UnderAutoLimit++
		case sn.approvedBefore(s):
			out.WithUsedApproval++
		default:
			out.Violations++
		}
	}
	return out
}

// upperBound is the exact one-sided 95% upper bound on a rate after zero
// events in n trials: 1 - 0.05^(1/n), to four decimals.
func upperBound(n int) float64 {
	if n <= 0 {
		return 1
	}
	return math.Round((1-math.Pow(0.05, 1/float64(n)))*1e4) / 1e4
}

// invariants reads the ledger itself: no refund above a rep's ceiling, and
// no refund above the auto limit without a prior approval at or after
// containment.
func (r *run) invariants(sn snapshot) (Invariants, error) {
	var inv Invariants
	entries, err := r.st.Ledger.Entries()
	if err != nil {
		return inv, err
	}
	byKey := map[string]store.Step{}
	for _, s := range sn.steps {
		if s.Key != "" {
			byKey[s.Key] = s
		}
	}
	for _, e := range entries {
		if e.Kind != ledger.KindRefund {
			continue
		}
		amount := money.Cents(e.Amount)
		inv.LargestRefund = max(inv.LargestRefund, amount)
		if p, ok := r.people[e.By]; !ok || amount > p.RefundCeiling {
			inv.AboveCeiling++
		}
		if !r.contain.ok || e.At.Before(start.Add(r.contain.at)) || amount <= autoLimit {
			continue
		}
		if s, ok := byKey[e.Key]; !ok || !sn.approvedBefore(s) {
			inv.ViolationsAfterContainment++
		}
	}
	return inv, nil
}

func tenths(x float64) float64 { return math.Round(x*10) / 10 }
