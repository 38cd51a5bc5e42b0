package reconcile

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/countersign/countersign/executor/dispatch"
	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/release"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

// DefaultAutoLimit is the designed auto limit, policy p1's refund_auto,
// fixed here on purpose (see the package doc): refunds above it execute
// only with a used approval unless a bundle the gate vouched for decided
// them under a higher limit of its own.
const DefaultAutoLimit money.Cents = 5000

// Ledger entry kinds as the ledger reports them.
const (
	kindRefund   = "refund"
	kindReversal = "reversal"
)

// Input is everything one reconciliation compares.
type Input struct {
	Records
	Entries   []dispatch.Entry
	Shipments []dispatch.Shipment
}

// Classify compares the agent's records with the ledger and the order
// system and returns the report (with At left zero). A refund is held to
// the limit in.HeldTo gives it (see release.Held.Limit, with autoLimit as
// the designed one), else to autoLimit; autoLimit <= 0 means
// DefaultAutoLimit. It reads its input only; the slices are not modified.
func Classify(in Input, autoLimit money.Cents) Report {
	if autoLimit <= 0 {
		autoLimit = DefaultAutoLimit
	}
	c := newComparison(in, autoLimit)
	c.refunds()
	c.unclaimedEntries()
	c.shipments()
	c.report.finish(c.matched)
	return c.report
}

type stepID struct {
	wf string
	n  int
}

// comparison holds the indexes of one Classify call.
type comparison struct {
	in        Input
	limit     money.Cents
	steps     []store.Step
	entries   []dispatch.Entry
	rep       map[string]string           // workflow -> rep
	approvals map[stepID][]store.Approval // by the step they were requested for
	byKey     map[string]dispatch.Entry   // refund entries by idempotency key (first wins)
	reversed  map[string]string           // entry id -> the reversal that undid it
	claimed   map[string]bool             // entry ids an executed or in-flight step accounts for
	holders   map[string]StepRef          // key -> first step holding it with no effect recorded
	matched   int
	report    Report
}

func newComparison(in Input, limit money.Cents) *comparison {
	c := &comparison{
		in: in, limit: limit,
		steps:     slices.Clone(in.Steps),
		entries:   slices.Clone(in.Entries),
		rep:       make(map[string]string, len(in.Workflows)),
		approvals: make(map[stepID][]store.Approval),
		byKey:     make(map[string]dispatch.Entry),
		reversed:  make(map[string]string),
		claimed:   make(map[string]bool),
		holders:   make(map[string]StepRef),
		report:    Report{AutoLimit: limit},
	}
	slices.SortFunc(c.steps, func(a, b store.Step) int {
		return cmp.Or(cmp.Compare(a.Workflow, b.Workflow), cmp.Compare(a.N, b.N))
	})
	slices.SortFunc(c.entries, func(a, b dispatch.Entry) int { return compareIDs(a.ID, b.ID) })
	for _, w := range in.Workflows {
		c.rep[w.ID] = w.User
	}
	for _, a := range in.Approvals {
		id := stepID{a.Workflow, a.N}
		c.approvals[id] = append(c.approvals[id], a)
	}
	for _, e := range c.entries {
		switch {
		case e.Kind == kindReversal && e.Reverses != "":
			c.reversed[e.Reverses] = e.ID
		case e.Kind == kindRefund && e.Key != "":
			if _, dup := c.byKey[e.Key]; !dup {
				c.byKey[e.Key] = e
			}
		}
	}
	return c
}

// refunds classifies every refund step against the ledger entry under its key.
func (c *comparison) refunds() {
	f := &c.report.Findings
	for _, s := range c.steps {
		if s.Tool != tool.IssueRefund {
			continue
		}
		ref := StepRef{Workflow: s.Workflow, N: s.N, Order: s.Args.Order}
		e, has := c.entry(s.Key)
		reversed := has && c.reversed[e.ID] != ""
		switch s.Status {
		case store.StepDone, store.StepCompensated:
			switch {
			case !has:
				f.AgentDoneLedgerMissing = append(f.AgentDoneLedgerMissing, MissingEntry{StepRef: ref, Amount: s.Args.Amount, Key: s.Key})
			case reversed:
				c.claimed[e.ID] = true
				c.report.Explained.Reversed++
			case e.Amount != s.Args.Amount:
				c.claimed[e.ID] = true
				f.AmountMismatch = append(f.AmountMismatch, AmountDifference{StepRef: ref, StepAmount: s.Args.Amount, LedgerAmount: e.Amount, Entry: e.ID})
			default:
				c.claimed[e.ID] = true
				c.matched++
			}
		case store.StepStarted, store.StepUnknown:
			in := InFlight{StepRef: ref, Amount: s.Args.Amount, Status: s.Status}
			if has {
				c.claimed[e.ID] = true
				in.Entry = e.ID
				f.InFlightLedgerHasIt = append(f.InFlightLedgerHasIt, in)
			} else {
				f.InFlightLedgerLacksIt = append(f.InFlightLedgerLacksIt, in)
			}
		default:
			// The step records no effect. An entry under its key is still
			// unaccounted for; remember the step as the one to adopt it.
			if has {
				if _, seen := c.holders[s.Key]; !seen {
					c.holders[s.Key] = ref
				}
			}
			continue
		}
		// Executed: the agent says done, or the ledger holds the key.
		executed := s.Status == store.StepDone || has
		limit, held, judged := c.limitOf(ref)
		if !executed || s.Status == store.StepCompensated || reversed || s.Args.Amount <= limit {
			continue
		}
		switch c.approvalOf(s) {
		case approvedBefore:
		case ratifiedAfter:
			c.report.Explained.Ratified++
		default:
			at := s.Finished
			if at.IsZero() {
				at = s.ReservedAt
			}
			o := OverLimit{StepRef: ref, Amount: s.Args.Amount, Rep: c.rep[s.Workflow], At: at.UTC(), Approval: s.Approval, Limit: limit}
			if has {
				o.Entry = e.ID
			}
			if judged {
				o.Revision, o.Note = held.Revision, held.Fallback
			}
			f.RefundOverLimitWithoutApproval = append(f.RefundOverLimitWithoutApproval, o)
		}
	}
}

// limitOf is the auto limit the refund step ref is held to, and the
// look-up that gave it when there was one.
func (c *comparison) limitOf(ref StepRef) (money.Cents, release.Held, bool) {
	h, ok := c.in.HeldTo[ref]
	if !ok {
		return c.limit, h, false
	}
	return h.Limit(c.limit), h, true
}

func (c *comparison) entry(key string) (dispatch.Entry, bool) {
	if key == "" {
		return dispatch.Entry{}, false
	}
	e, ok := c.byKey[key]
	return e, ok
}

type approvalState int

const (
	noApproval approvalState = iota
	approvedBefore
	ratifiedAfter
)

// approvalOf tells whether a refund that executed was approved: a used
// approval naming exactly this call (same tool, same normalized
// arguments), or a lead's retroactive approval of it. Anything else (a
// pending or voided approval, one for the call before an amendment, a
// model-written approved_by) does not count.
func (c *comparison) approvalOf(s store.Step) approvalState {
	state := noApproval
	for _, a := range c.approvals[stepID{s.Workflow, s.N}] {
		if a.Tool != s.Tool || a.Args != s.Args {
			continue
		}
		switch {
		case a.Retroactive && (a.Status == store.ApprovalApproved || a.Status == store.ApprovalUsed):
			state = ratifiedAfter
		case !a.Retroactive && a.Status == store.ApprovalUsed:
			return approvedBefore
		}
	}
	return state
}

// unclaimedEntries lists the refund and external entries that no executed or
// in-flight step accounts for. Reversals are explained by what they undo;
// an entry that was itself reversed has nothing left to classify.
func (c *comparison) unclaimedEntries() {
	f := &c.report.Findings
	for _, e := range c.entries {
		if e.Kind == kindReversal || c.claimed[e.ID] {
			continue
		}
		if c.reversed[e.ID] != "" {
			c.report.Explained.Reversed++
			continue
		}
		u := UnclaimedEntry{Entry: e.ID, Kind: e.Kind, Order: e.Order, Amount: e.Amount, By: e.By, Key: e.Key}
		if h, ok := c.holders[e.Key]; ok && e.Key != "" {
			u.Step = &h
		}
		f.LedgerEntryWithoutStep = append(f.LedgerEntryWithoutStep, u)
	}
}

// shipments compares, per order, the shipments in the order system with
// the reship steps that are done.
func (c *comparison) shipments() {
	shipped := map[string]int{}
	for _, sh := range c.in.Shipments {
		shipped[sh.Order]++
	}
	done := map[string]int{}
	for _, s := range c.steps {
		if s.Tool == tool.ReshipOrder && s.Status == store.StepDone {
			done[s.Args.Order]++
		}
	}
	orders := make([]string, 0, len(shipped)+len(done))
	for o := range shipped {
		orders = append(orders, o)
	}
	for o := range done {
		if _, ok := shipped[o]; !ok {
			orders = append(orders, o)
		}
	}
	slices.SortFunc(orders, compareIDs)
	for _, o := range orders {
		if shipped[o] != done[o] {
			c.report.Findings.ShipmentCountMismatch = append(c.report.Findings.ShipmentCountMismatch,
				ShipmentDifference{Order: o, Shipments: shipped[o], Steps: done[o]})
		}
	}
}

// compareIDs orders ids such as L2 before L10 and O-1001 before O-1002:
// by the prefix before the trailing digits, then by their value.
func compareIDs(a, b string) int {
	pa, na, oka := splitID(a)
	pb, nb, okb := splitID(b)
	if oka && okb {
		return cmp.Or(strings.Compare(pa, pb), cmp.Compare(na, nb), strings.Compare(a, b))
	}
	return strings.Compare(a, b)
}

func splitID(id string) (prefix string, n uint64, ok bool) {
	i := len(id)
	for i > 0 && id[i-1] >= '0' && id[i-1] <= '9' {
		i--
	}
	if i == len(id) || len(id)-i > 19 {
		return id, 0, false
	}
	n, err := strconv.ParseUint(id[i:], 10, 64)
	return id[:i], n, err == nil
}

// at is the report time for a clock reading.
func at(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }
