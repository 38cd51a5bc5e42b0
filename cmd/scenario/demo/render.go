package demo

import (
	"fmt"
	"io"
	"strings"

	"github.com/countersign/countersign/executor/reconcile"
)

// Each section renders itself for a person; WriteText of the Report
// prints them in the demo's order.

// WriteText writes section 1.
func (p PolicyDecisions) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "1. policy decisions under bundle %s (every outcome names the rule that made it)\n", p.Revision)
	fmt.Fprintf(&b, "  %-8s %-7s %9s  %-17s %-27s %-17s %s\n", "user", "order", "amount", "decision", "rule", "step", "why")
	for _, r := range p.Rows {
		fmt.Fprintf(&b, "  %-8s %-7s %9s  %-17s %-27s %-17s %s\n", r.User, r.Order, r.Amount, r.Decision, r.Rule, r.Status, r.Why)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteText writes section 2.
func (a ApprovalAuthority) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "2. approval authority: %s, %s asks for %s on %s\n", a.Workflow, a.Rep, a.Amount, a.Order)
	fmt.Fprintf(&b, "  the approver is shown: %s\n", a.Summary)
	for _, at := range a.Attempts {
		who := "approve as " + at.Approver
		if at.AfterSeconds > 0 {
			who += fmt.Sprintf(" %d s later", at.AfterSeconds)
		}
		verdict := "refused: " + at.Outcome
		if at.Outcome == "approved" {
			verdict = "approved"
		}
		if at.Outcome != at.Want {
			verdict += fmt.Sprintf("   <- WRONG, the rules say %s", at.Want)
		}
		fmt.Fprintf(&b, "  %-36s -> %s\n", who, verdict)
	}
	fmt.Fprintf(&b, "  %s ends %s; after the agent resumes, refunds in the ledger: %d\n", a.Approval, a.ApprovalStatus, a.RefundsExecuted)
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteText writes section 3.
func (x Binding) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "3. binding: an approval covers one exact call\n")
	fmt.Fprintf(&b, "  lead-dee approves %s (%s on %s) -> %s\n", x.FirstApproval, x.Approved, x.Order, x.ApproveOutcome)
	fmt.Fprintf(&b, "  amended to %s, resumed -> step %s | refunds in the ledger: %d", x.Amended, x.StepStatus, x.Refunds)
	if x.Refunds > 0 {
		fmt.Fprintf(&b, " (%s)", x.Refunded)
	}
	fmt.Fprintf(&b, " | %s %s", x.FirstApproval, x.FirstApprovalStatus)
	if x.NewApproval != "" {
		fmt.Fprintf(&b, " | new approval %s %s for %s", x.NewApproval, x.NewApprovalStatus, x.NewApprovalAmount)
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteText writes section 4.
func (g Gate) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "4. the policy gate: the boundary cases of the limits in force run against each bundle\n")
	for _, r := range g.Runs {
		var fails []string
		for _, f := range r.Failures {
			fails = append(fails, fmt.Sprintf("%s wants %s, got %s", f.Amount, f.Expected, f.Got))
		}
		line := fmt.Sprintf("  %-31s %2d cases, failing %d", r.Label, r.Cases, len(r.Failures))
		if len(fails) > 0 {
			line += ": " + strings.Join(fails, "; ")
		}
		if len(r.TestFailures) > 0 {
			line += fmt.Sprintf(" (+%d own Rego tests failing)", len(r.TestFailures))
		}
		b.WriteString(line + "\n")
	}
	verdict := "activated (the gate let it through)"
	if g.Rejected {
		verdict = "rejected"
	}
	fmt.Fprintf(&b, "  %s offered to a running sidecar: %s; the active bundle is %s\n", g.Offered, verdict, g.ActiveAfter)
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteText writes the crash matrix.
func (m CrashMatrix) WriteText(w io.Writer) error {
	var b strings.Builder
	b.WriteString("crash matrix: crash at a point, start a new stack over the same data dir, let it resume, count the effects\n")
	fmt.Fprintf(&b, "  %-7s %-16s  %-24s %s\n", "step", "crash point", "designed: effects", "write_ahead, reference_keys removed: effects")
	for _, r := range m.Rows {
		fmt.Fprintf(&b, "  %-7s %-16s  %-24s %s\n", r.Step, r.Point, effects(r.Designed, r.Step), effects(r.WithoutWriteAhead, r.Step))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// effects is "1 refund(s), step done".
func effects(c CrashCell, unit string) string {
	return fmt.Sprintf("%d %s(s), step %s", c.Effects, unit, c.Status)
}

// WriteText writes the reconciliation section: the seeded differences,
// the report with its repair classes, and the report after a restart.
func (r Reconciliation) WriteText(w io.Writer) error {
	var b strings.Builder
	b.WriteString("reconciliation: the agent's records against the ledger and the order system\n")
	b.WriteString("  planted before the run (besides clean refunds and a reshipment):\n")
	for _, s := range r.Seeded {
		fmt.Fprintf(&b, "    %-36s %s\n", s.Class, s.How)
	}
	for _, line := range strings.Split(strings.TrimRight(r.Before.Table(), "\n"), "\n") {
		if line != "" {
			line = "  " + line
		}
		b.WriteString(line + "\n")
	}
	fmt.Fprintf(&b, "  after a restart over the same data dir: %s %d, %s %d, %s %d, unexplained %d\n",
		reconcile.Matched, r.After.Count(reconcile.Matched),
		reconcile.InFlightLedgerHasIt, r.After.Count(reconcile.InFlightLedgerHasIt),
		reconcile.InFlightLedgerLacksIt, r.After.Count(reconcile.InFlightLedgerLacksIt), r.After.Unexplained)
	_, err := io.WriteString(w, b.String())
	return err
}

// MatrixHeader is the header line of the control-removal table.
func MatrixHeader() string {
	return fmt.Sprintf("%-44s %8s %16s  %s", "test", "designed", "control removed", "removed control")
}

// Line is the row as the control-removal table prints it.
func (r Row) Line() string {
	removed := "n/a"
	if r.Removed != nil {
		removed = verdict(*r.Removed)
	}
	return fmt.Sprintf("%-44s %8s %16s  %s", r.Test, verdict(r.Designed), removed, removedLabel(r.RemovedControls))
}

// Evidence is what the row's runs left in the systems of record.
func (r Row) Evidence() string {
	s := r.Designed.Evidence
	if r.Removed != nil {
		s += " | removed: " + r.Removed.Evidence
	}
	return s
}

// verdict is pass or FAIL: upper case where the invariant broke.
func verdict(o Outcome) string {
	if o.Pass {
		return "pass"
	}
	return "FAIL"
}

// LayeringLine is the line that shows each layer holding alone.
func LayeringLine(ls []Layer) string {
	parts := make([]string, len(ls))
	for i, l := range ls {
		parts[i] = fmt.Sprintf("%s=false only: %s", l.Removed, verdict(l.Outcome))
	}
	return strings.Join(parts, " | ")
}

// WriteText writes the control-removal matrix, the layering lines, the
// evidence of every run, and any problem that makes the matrix dishonest.
func (m Matrix) WriteText(w io.Writer) error {
	var b strings.Builder
	b.WriteString("control-removal matrix: each test on the designed system, then with its control switched off\n")
	b.WriteString("  " + MatrixHeader() + "\n")
	for _, r := range m.Rows {
		b.WriteString("  " + r.Line() + "\n")
	}
	byTest := map[string][]Layer{}
	var order []string
	for _, l := range m.Layering {
		if _, ok := byTest[l.Test]; !ok {
			order = append(order, l.Test)
		}
		byTest[l.Test] = append(byTest[l.Test], l)
	}
	for _, t := range order {
		fmt.Fprintf(&b, "\n  layering: %q with one layer removed at a time\n    %s\n", t, LayeringLine(byTest[t]))
	}
	b.WriteString("\n  what each run left in the systems of record (designed | removed)\n")
	for _, r := range m.Rows {
		fmt.Fprintf(&b, "    %-42s %s\n", r.Test+":", r.Evidence())
	}
	if p := m.Problems(); len(p) > 0 {
		b.WriteString("\n  PROBLEMS: the matrix does not prove what it claims\n")
		for _, x := range p {
			b.WriteString("    " + x + "\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
