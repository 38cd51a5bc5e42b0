package drill

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/countersign/countersign/executor/reconcile"
)

// WriteText prints the report for people, one section after another with
// a blank line between. The same report always prints the same bytes: maps
// are printed in sorted or fixed key order.
func (r *Report) WriteText(w io.Writer) error {
	b := bufio.NewWriter(w)
	p := printer{b}
	sections := []func(printer){
		r.writeTraffic, r.writeGate, r.writeTimeline, r.writePaused, r.writePolicies,
		r.writeWorklist, r.writeReconciliation, r.writeSinceFix, r.writeInvariants,
	}
	for i, section := range sections {
		if i > 0 {
			p.line("")
		}
		section(p)
	}
	return b.Flush()
}

// printer writes one line of the report per call.
type printer struct{ w io.Writer }

func (p printer) line(format string, a ...any) { fmt.Fprintf(p.w, format+"\n", a...) }

func (r *Report) writeTraffic(p printer) {
	t := r.Traffic
	p.line("incident drill, seed %d: %d simulated minutes, %d tickets (%s)", r.Seed, t.Minutes, t.Tickets, counts(t.ByRep))
	p.line("  refunds asked: %d under $50, %d from $51 to $500, %d above $500; %d tickets also ask a reshipment", t.Small, t.Mid, t.High, t.Reships)
	p.line("  the drill's bundles raise the caps to %s per rep per rolling day and %s per hour for the agent", t.RepDaily, t.AgentHourly)
}

func (r *Report) writeGate(p printer) {
	p.line("the gate on the bundles as shipped (their own Rego tests and the boundary cases of the limits in force)")
	for _, v := range r.Gate {
		if v.Passed {
			p.line("  %s  passes: %d Rego tests, %d pinned cases", v.Revision, v.Tests, v.Cases)
			continue
		}
		p.line("  %s  REJECTED: %d of %d pinned cases fail, %d Rego test(s) fail", v.Revision, len(v.Failures), v.Cases, len(v.TestFailures))
		for _, f := range v.Failures {
			p.line("      %9s  %-30s expected %-17s got %s", f.Amount, f.Case, f.Expected, f.Got)
		}
	}
	if cases := capCases(r.Gate); len(cases) > 0 {
		p.line("  with the raised caps every copy also fails %s, and nothing else;", strings.Join(quote(cases), " and "))
		p.line("  so the drill installs its p1 and p3 by break-glass, that verdict being the recorded reason")
	}
}

// capCases are the cases the drill's copies fail besides those of the
// bundles as shipped, each once, in the order first met.
func capCases(gate []GateVerdict) []string {
	var out []string
	for _, v := range gate {
		for _, f := range v.CopyFailures {
			if !slices.Contains(out, f.Case) {
				out = append(out, f.Case)
			}
		}
	}
	return out
}

// writeTimeline prints the events, those that never happened, and the
// monitor's alerts.
func (r *Report) writeTimeline(p printer) {
	p.line("timeline (minutes after the release of p2)")
	seen := map[string]bool{}
	for _, e := range r.Timeline {
		seen[e.Name] = true
		p.line("  %-9s %+6.1f  %s", e.Name, e.Minute, e.Detail)
	}
	for _, name := range []string{EventDeploy, EventAlert, EventContain, EventFix, EventReenable} {
		if !seen[name] {
			p.line("  %-9s  never", name)
		}
	}
	p.line("monitor alerts (the records checked every %d minutes)", int(monitorEvery/time.Minute))
	for _, a := range r.Alerts {
		line := fmt.Sprintf("  %+6.1f  %s", a.Minute, a.Kind)
		if a.Refunds > 0 {
			line += fmt.Sprintf(": %d new refund(s), %s", a.Refunds, a.Total)
		}
		p.line("%s", line)
	}
	if len(r.Alerts) == 0 {
		p.line("  none")
	}
}

// writePaused lists the workflows paused at the fix that did not end done.
func (r *Report) writePaused(p printer) {
	p.line("workflows paused when the fix was released: %d; at the end of the traffic they were: %s", r.Paused.Count, counts(r.Paused.Ended))
	for _, w := range r.Paused.Workflows {
		if w.Ended == "done" {
			continue
		}
		line := fmt.Sprintf("  %s  %s  refund %s  %s", w.Workflow, w.Rep, w.Refund, w.Ended)
		if w.Rule != "" {
			line += "  (" + w.Rule + ")"
		}
		p.line("%s", line)
	}
}

func (r *Report) writePolicies(p printer) {
	p.line("refund steps by the policy revision of their last decision")
	p.line("  policy  refund steps  executed  above $50 without approval  blocked by token ceiling  denied by policy  waiting at end")
	for _, row := range r.Policies {
		p.line("  %-6s  %12d  %8d  %6d  %-19s  %23d  %16d  %14d", row.Revision, row.RefundSteps, row.Executed,
			row.Violations, "("+row.ViolationTotal.String()+")", row.BlockedByCeiling, row.DeniedByPolicy, row.Waiting)
	}
	for _, row := range r.Policies {
		if row.DeniedByPolicy > 0 {
			p.line("  %s denied by rule: %s", row.Revision, counts(row.DeniedBy))
		}
	}
}

// writeWorklist prints reconciliation's worklist and what the lead did
// with each item.
func (r *Report) writeWorklist(p printer) {
	wl := r.Worklist
	p.line("worklist (reconciliation: refunds above the auto limit executed without a used approval): %d, %s", wl.Count, wl.Total)
	if wl.Count > 0 {
		p.line("  by rep: %s; first %+.1f min, last %+.1f min after the release", counts(wl.ByRep), wl.FirstMinute, wl.LastMinute)
	}
	p.line("remediation: a lead reviews each item")
	for _, it := range wl.Items {
		what := it.Action + " by " + it.By
		if it.Reversal != "" {
			what += fmt.Sprintf(" (%s reversed by %s)", it.Entry, it.Reversal)
		}
		p.line("  %s/%d  %s  %-7s %9s  %+6.1f  %s: %s", it.Workflow, it.N, it.Rep, it.Order, it.Amount, it.Minute, what, it.Reason)
	}
	rm := r.Remediation
	p.line("  ratified %d (%s); reversed %d in the ledger, %s to recover from customers outside the system", rm.Ratified, rm.RatifiedTotal, rm.Reversed, rm.ToRecover)
}

// writeReconciliation prints every class, four to a line.
func (r *Report) writeReconciliation(p printer) {
	p.line("reconciliation after remediation: %d unexplained", r.After.Unexplained)
	var classes []string
	for _, c := range reconcile.Classes() {
		classes = append(classes, fmt.Sprintf("%s %d", c, r.After.Classes[c]))
	}
	for i := 0; i < len(classes); i += 4 {
		p.line("  %s", strings.Join(classes[i:min(i+4, len(classes))], ", "))
	}
	p.line("  explained by the remediation: %d reversed, %d ratified", r.After.Explained.Reversed, r.After.Explained.Ratified)
}

// writeSinceFix prints the refunds since the fix and the upper bounds on
// the violation rate they support.
func (r *Report) writeSinceFix(p printer) {
	s := r.SinceFix
	p.line("since the fix (%s): %d refunds executed, %d within the auto limit, %d with a used approval; violations: %d", s.Revision, s.Executed, s.UnderAutoLimit, s.WithUsedApproval, s.Violations)
	for _, bd := range r.Bounds {
		if s.Violations > 0 && bd.N == s.WithUsedApproval {
			p.line("  n=%-5d no bound: violations were observed", bd.N)
			continue
		}
		p.line("  n=%-5d 95%% upper bound on the violation rate, zero violations: %.4f", bd.N, bd.Bound)
	}
}

func (r *Report) writeInvariants(p printer) {
	inv := r.Invariants
	verdict := "hold"
	if !inv.Hold() {
		verdict = "BROKEN"
	}
	p.line("invariants %s: %d violating refund(s) in the ledger after containment; %d ledger refund(s) above the rep's ceiling (largest %s); %d unexplained after remediation",
		verdict, inv.ViolationsAfterContainment, inv.AboveCeiling, inv.LargestRefund, inv.Unexplained)
}

// counts prints a map as "k1 n1, k2 n2" in key order.
func counts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func quote(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}
