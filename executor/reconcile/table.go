package reconcile

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// WriteTable writes r for a person: one line per class with its count and
// findings, the totals, then the repair class of every class with findings.
func (r Report) WriteTable(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "reconciliation at %s (auto limit %s)\n", r.At.UTC().Format(time.RFC3339), r.AutoLimit)
	for _, c := range Classes() {
		fmt.Fprintf(&b, "%-36s %4d", c, r.Count(c))
		if items := r.Findings.lines(c); len(items) > 0 {
			fmt.Fprintf(&b, "  %s", strings.Join(items, "; "))
		}
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "unexplained differences: %d (explained: %d reversed, %d ratified)\n",
		r.Unexplained, r.Explained.Reversed, r.Explained.Ratified)
	first := true
	for _, c := range Classes() {
		if r.Findings.Len(c) == 0 {
			continue
		}
		rp, ok := RepairOf(c)
		if !ok {
			continue
		}
		if first {
			b.WriteString("\nwho may act on each class with findings\n")
			first = false
		}
		who := rp.Who + " decides"
		if rp.Automatic {
			who = rp.Who + ", automatically"
		}
		fmt.Fprintf(&b, "  %s (%s): %s\n", c, who, rp.Action)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Table returns WriteTable's text.
func (r Report) Table() string {
	var b strings.Builder
	_ = r.WriteTable(&b)
	return b.String()
}

// lines renders the findings of class c, one short text each.
func (f Findings) lines(c Class) []string {
	var out []string
	switch c {
	case AgentDoneLedgerMissing:
		for _, m := range f.AgentDoneLedgerMissing {
			out = append(out, fmt.Sprintf("%s %s", m.StepRef.label(), m.Amount))
		}
	case AmountMismatch:
		for _, m := range f.AmountMismatch {
			out = append(out, fmt.Sprintf("%s step %s ledger %s (%s)", m.StepRef.label(), m.StepAmount, m.LedgerAmount, m.Entry))
		}
	case LedgerEntryWithoutStep:
		for _, u := range f.LedgerEntryWithoutStep {
			s := fmt.Sprintf("%s %s %s %s by %s", u.Entry, u.Kind, u.Order, u.Amount, u.By)
			if u.Step != nil {
				s += fmt.Sprintf(" (key held by %s/%d, which recorded no effect)", u.Step.Workflow, u.Step.N)
			}
			out = append(out, s)
		}
	case InFlightLedgerHasIt, InFlightLedgerLacksIt:
		list := f.InFlightLedgerHasIt
		if c == InFlightLedgerLacksIt {
			list = f.InFlightLedgerLacksIt
		}
		for _, i := range list {
			s := fmt.Sprintf("%s %s %s", i.StepRef.label(), i.Amount, i.Status)
			if i.Entry != "" {
				s += " (" + i.Entry + ")"
			}
			out = append(out, s)
		}
	case RefundOverLimitWithoutApproval:
		for _, o := range f.RefundOverLimitWithoutApproval {
			s := fmt.Sprintf("%s %s by %s at %s", o.StepRef.label(), o.Amount, o.Rep, o.At.UTC().Format(time.RFC3339))
			if o.Entry != "" {
				s += " (" + o.Entry + ")"
			}
			if o.Revision != "" || o.Note != "" {
				s += fmt.Sprintf(" over %s", o.Limit)
				if o.Revision != "" {
					s += " (decided by " + o.Revision + ")"
				}
				if o.Note != "" {
					s += ": " + o.Note
				}
			}
			out = append(out, s)
		}
	case ShipmentCountMismatch:
		for _, d := range f.ShipmentCountMismatch {
			out = append(out, fmt.Sprintf("%s shipments %d, done reship steps %d", d.Order, d.Shipments, d.Steps))
		}
	}
	return out
}

// label is "W1/2 O-1001". Not a String method: it would be promoted to
// every finding that embeds StepRef and hide their other fields from fmt.
func (s StepRef) label() string { return fmt.Sprintf("%s/%d %s", s.Workflow, s.N, s.Order) }
