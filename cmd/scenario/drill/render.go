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

// WriteText prints the report for people. The same report always prints
// the same bytes: maps are printed in sorted or fixed key order.
func (r *Report) WriteText(w io.Writer) error {
	b := bufio.NewWriter(w)
	p := func(format string, a ...any) { fmt.Fprintf(b, format+"\n", a...) }
	t := r.Traffic

	p("incident drill, seed %d: %d simulated minutes, %d tickets (%s)", r.Seed, t.Minutes, t.Tickets, counts(t.ByRep))
	p("  refunds asked: %d under $50, %d from $51 to $500, %d above $500; %d tickets also ask a reshipment", t.Small, t.Mid, t.High, t.Reships)
	p("  the drill's bundles raise the caps to %s per rep per rolling day and %s per hour for the agent", t.RepDaily, t.AgentHourly)
	p("")

	p("the gate on the bundles as shipped (their own Rego tests and the pinned boundary cases)")
	for _, v := range r.Gate {
		if v.Passed {
			p("  %s  passes: %d Rego tests, %d pinned cases", v.Revision, v.Tests, v.Cases)
			continue
		}
		p("  %s  REJECTED: %d of %d pinned cases fail, %d Rego test(s) fail", v.Revision, len(v.Failures), v.Cases, len(v.TestFailures))
		for _, f := range v.Failures {
			p("      %9s  %-30s expected %-17s got %s", f.Amount, f.Case, f.Expected, f.Got)
		}
	}
	var capCases []string
	for _, v := range r.Gate {
		for _, f := range v.CopyFailures {
			if !slices.Contains(capCases, f.Case) {
				capCases = append(capCases, f.Case)
			}
		}
	}
	if len(capCases) > 0 {
		p("  with the raised caps every copy also fails %s, and nothing else;", strings.Join(quote(capCases), " and "))
		p("  so the drill installs its p1 and p3 by break-glass, that verdict being the recorded reason")
	}
	p("")

	p("timeline (minutes after the release of p2)")
	seen := map[string]bool{}
	for _, e := range r.Timeline {
		seen[e.Name] = true
		p("  %-9s %+6.1f  %s", e.Name, e.Minute, e.Detail)
	}
	for _, name := range []string{EventDeploy, EventAlert, EventContain, EventFix, EventReenable} {
		if !seen[name] {
			p("  %-9s  never", name)
		}
	}
	p("monitor alerts (the records checked every %d minutes)", int(monitorEvery/time.Minute))
	for _, a := range r.Alerts {
		line := fmt.Sprintf("  %+6.1f  %s", a.Minute, a.Kind)
		if a.Refunds > 0 {
			line += fmt.Sprintf(": %d new refund(s), %s", a.Refunds, a.Total)
		}
		p("%s", line)
	}
	if len(r.Alerts) == 0 {
		p("  none")
	}
	p("")

	p("workflows paused when the fix was released: %d; at the end of the traffic they were: %s", r.Paused.Count, counts(r.Paused.Ended))
	for _, w := range r.Paused.Workflows {
		if w.Ended == "done" {
			continue
		}
		line := fmt.Sprintf("  %s  %s  refund %s  %s", w.Workflow, w.Rep, w.Refund, w.Ended)
		if w.Rule != "" {
			line += "  (" + w.Rule + ")"
		}
		p("%s", line)
	}
	p("")

	p("refund steps by the policy revision of their last decision")
	p("  policy  refund steps  executed  above $50 without approval  blocked by token ceiling  denied by policy  waiting at end")
	for _, row := range r.Policies {
		p("  %-6s  %12d  %8d  %6d  %-19s  %23d  %16d  %14d", row.Revision, row.RefundSteps, row.Executed,
			row.Violations, "("+row.ViolationTotal.String()+")", row.BlockedByCeiling, row.DeniedByPolicy, row.Waiting)
	}
	for _, row := range r.Policies {
		if row.DeniedByPolicy > 0 {
			p("  %s denied by rule: %s", row.Revision, counts(row.DeniedBy))
		}
	}
	p("")

	wl := r.Worklist
	p("worklist (reconciliation: refunds above the auto limit executed without a used approval): %d, %s", wl.Count, wl.Total)
	if wl.Count > 0 {
		p("  by rep: %s; first %+.1f min, last %+.1f min after the release", counts(wl.ByRep), wl.FirstMinute, wl.LastMinute)
	}
	p("remediation: a lead reviews each item")
	for _, it := range wl.Items {
		what := it.Action + " by " + it.By
		if it.Reversal != "" {
			what += fmt.Sprintf(" (%s reversed by %s)", it.Entry, it.Reversal)
		}
		p("  %s/%d  %s  %-7s %9s  %+6.1f  %s: %s", it.Workflow, it.N, it.Rep, it.Order, it.Amount, it.Minute, what, it.Reason)
	}
	rm := r.Remediation
	p("  ratified %d (%s); reversed %d in the ledger, %s to recover from customers outside the system", rm.Ratified, rm.RatifiedTotal, rm.Reversed, rm.ToRecover)
	p("")

	p("reconciliation after remediation: %d unexplained", r.After.Unexplained)
	var classes []string
	for _, c := range reconcile.Classes() {
		classes = append(classes, fmt.Sprintf("%s %d", c, r.After.Classes[c]))
	}
	for i := 0; i < len(classes); i += 4 {
		p("  %s", strings.Join(classes[i:min(i+4, len(classes))], ", "))
	}
	p("  explained by the remediation: %d reversed, %d ratified", r.After.Explained.Reversed, r.After.Explained.Ratified)
	p("")

	s := r.SinceFix
	p("since the fix (%s): %d refunds executed, %d within the auto limit, %d with a used approval; violations: %d", s.Revision, s.Executed, s.UnderAutoLimit, s.WithUsedApproval, s.Violations)
	for _, bd := range r.Bounds {
		if s.Violations > 0 && bd.N == s.WithUsedApproval {
			p("  n=%-5d no bound: violations were observed", bd.N)
			continue
		}
		p("  n=%-5d 95%% upper bound on the violation rate, zero violations: %.4f", bd.N, bd.Bound)
	}
	p("")

	inv := r.Invariants
	verdict := "hold"
	if !inv.Hold() {
		verdict = "BROKEN"
	}
	p("invariants %s: %d violating refund(s) in the ledger after containment; %d ledger refund(s) above the rep's ceiling (largest %s); %d unexplained after remediation",
		verdict, inv.ViolationsAfterContainment, inv.AboveCeiling, inv.LargestRefund, inv.Unexplained)
	return b.Flush()
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
