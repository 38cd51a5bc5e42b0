package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/countersign/countersign/executor/audit"
	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/fixture"
	"github.com/countersign/countersign/executor/reconcile"
	"github.com/countersign/countersign/executor/sim/ledger"
	"github.com/countersign/countersign/executor/sim/orders"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

// Invariant names a property every seed must keep.
type Invariant string

// The invariants, in the order they are checked.
const (
	// InvLedger: one ledger refund entry per done refund step (by order:
	// as many entries, the same total), and none without a step.
	InvLedger Invariant = "one_ledger_entry_per_done_refund"
	// InvPaid: no order refunded above what it paid.
	InvPaid Invariant = "refunds_within_paid"
	// InvRepDay: no rep's done refunds above the daily cap in any rolling
	// window (by the steps' reservation times).
	InvRepDay Invariant = "rep_day_cap"
	// InvAgentHour: the same for the agent's hourly cap.
	InvAgentHour Invariant = "agent_hour_cap"
	// InvApproval: on each order, the done refunds without a used
	// approval bound to their exact call add up to at most the auto
	// limit (the policy counts every prior refund on the order, so only
	// refunds within the limit run alone).
	InvApproval Invariant = "approval_above_auto_limit"
	// InvShipment: one reshipment per done reship step (by order), and no
	// reference shipped twice.
	InvShipment Invariant = "one_shipment_per_done_reship"
	// InvReshipLimit: at most two reshipments of an order (R10 asks a
	// lead for the second, R11 denies a third).
	InvReshipLimit Invariant = "reships_within_R10_R11"
	// InvAcked: a step the engine answered done is done after every
	// restart.
	InvAcked Invariant = "acknowledged_done_survives"
	// InvSwitch: no effect first sent while its tool was switched off.
	InvSwitch Invariant = "no_effect_while_switched_off"
	// InvEpoch: no receiver accepts a token of a credential epoch raised
	// past (checked as each request is served).
	InvEpoch Invariant = "no_token_of_a_revoked_epoch_accepted"
	// InvCeiling: no ledger refund above the refund ceiling of the rep
	// whose delegation it used, whatever bundle decided it.
	InvCeiling Invariant = "refunds_within_the_reps_ceiling"
	// InvApprover: every approval granted was granted by a lead who is
	// not its requester, whatever bundle is active.
	InvApprover Invariant = "approvals_granted_by_a_lead_not_the_requester"
	// InvAudit: the audit chain verifies.
	InvAudit Invariant = "audit_chain_verifies"
	// InvReconciles: reconciliation (package reconcile, as a sidecar
	// runs it) finds no unexplained difference between the records and
	// the systems of record.
	InvReconciles Invariant = "reconciliation_explains_every_difference"
	// InvSettles: once the network heals and every token has expired,
	// one resume settles every step (none left pending, started or
	// unknown) without a person.
	InvSettles Invariant = "every_step_settles"
)

// Violation is an invariant found broken, with what broke it.
type Violation struct {
	Invariant Invariant `json:"invariant"`
	Detail    string    `json:"detail"`
}

func (v Violation) String() string { return string(v.Invariant) + ": " + v.Detail }

func (w *world) violate(inv Invariant, format string, args ...any) {
	v := Violation{Invariant: inv, Detail: fmt.Sprintf(format, args...)}
	w.violations = append(w.violations, v)
	w.tracef("VIOLATION %s", v)
}

// checkAcked holds InvAcked on the store as it is now. At a restart it
// leaves out the steps answered done while the store was failing writes:
// their record may not have committed, and resume resolves them by key or
// reference (engine.recordLater); settling must have.
func (w *world) checkAcked(when string) {
	for _, id := range sortedKeys(w.acked) {
		a := w.acked[id]
		if a.lost && when == "restart" {
			continue
		}
		ref := a.ref
		var s store.Step
		err := w.db.View(func(tx *store.Tx) (err error) { s, err = tx.Step(ref.wf, ref.n); return err })
		if err != nil || (s.Status != store.StepDone && s.Status != store.StepCompensated) {
			w.violate(InvAcked, "%s answered done, after %s it is %q (%v)", id, when, s.Status, err)
		}
	}
}

// facts are the records the end-of-seed invariants read.
type facts struct {
	steps     []store.Step
	approvals map[string]store.Approval
	wfRep     map[string]string
	// unbound are the steps (workflow/n) a bundle decided that is held
	// to no cap or auto limit (simBundles.x100).
	unbound   map[string]bool
	entries   []ledger.Entry
	shipments []orders.Shipment
}

func (w *world) facts() (facts, error) {
	f := facts{approvals: map[string]store.Approval{}, wfRep: map[string]string{}, unbound: map[string]bool{}}
	err := w.db.View(func(tx *store.Tx) error {
		if err := tx.AllSteps(func(s store.Step) error { f.steps = append(f.steps, s); return nil }); err != nil {
			return err
		}
		for _, wf := range w.workflows {
			ds, err := tx.Decisions(wf.id)
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
			for _, d := range ds {
				if d.Revision == w.shared.bundles.x100.Revision() {
					f.unbound[fmt.Sprintf("%s/%d", d.Workflow, d.N)] = true
				}
			}
		}
		as, err := tx.Approvals(func(store.Approval) bool { return true })
		for _, a := range as {
			f.approvals[a.ID] = a
		}
		return err
	})
	if err != nil {
		return f, err
	}
	for _, wf := range w.workflows {
		f.wfRep[wf.id] = wf.rep
	}
	if f.entries, err = w.ledger.Entries(); err != nil {
		return f, err
	}
	f.shipments, err = w.orders.AllShipments()
	return f, err
}

// checkEnd holds every invariant on the settled world.
func (w *world) checkEnd() error {
	f, err := w.facts()
	if err != nil {
		return fmt.Errorf("sim: read the records: %w", err)
	}
	w.checkLedger(f)
	w.checkCaps(f)
	w.checkApprovals(f)
	w.checkApprovers(f)
	w.checkShipments(f)
	w.checkAcked("settling")
	rep, err := audit.Verify(w.db)
	if err != nil {
		return fmt.Errorf("sim: verify the audit chain: %w", err)
	}
	if !rep.OK {
		w.violate(InvAudit, "the chain breaks: %+v", rep.Broken)
	}
	sys := w.sidecars[0].sys
	job, err := reconcile.New(reconcile.Options{Records: reconcile.FromStore(w.db), Ledger: sys.Dispatcher().Ledger(),
		Shipments: sys.Dispatcher().Orders(), AutoLimit: w.limits.RefundAuto, Clock: w.clock})
	if err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	rec, err := job.Run(context.Background())
	if err != nil {
		return fmt.Errorf("sim: reconcile: %w", err)
	}
	// A refund decided under a bundle released by break glass is shown
	// to a person by design: the gate did not vouch for its limits, so
	// reconciliation holds it to the strictest auto limit known.
	unexplained := rec.Unexplained
	for _, o := range rec.Findings.RefundOverLimitWithoutApproval {
		if o.Revision == w.shared.bundles.x100.Revision() {
			unexplained--
		}
	}
	if unexplained > 0 {
		b, _ := json.Marshal(rec.Findings)
		w.violate(InvReconciles, "%d unexplained: %s", unexplained, b)
	}
	for _, s := range f.steps {
		switch s.Status {
		case store.StepPending, store.StepStarted, store.StepUnknown:
			w.violate(InvSettles, "%s is still %s after settling", stepLine(s), s.Status)
		}
	}
	return nil
}

type sum struct {
	n     int
	cents int64
}

func (w *world) checkLedger(f facts) {
	done, booked := map[string]sum{}, map[string]sum{}
	keys := map[string]bool{}
	// With the IdempotencyKeys control removed the dispatcher sends
	// <key>/attempt-<random> (dispatch.freshKey): still the step's entry.
	stepKey := func(key string) bool {
		if i := strings.Index(key, "/"); i > 0 {
			key = key[:i]
		}
		return keys[key]
	}
	for _, s := range f.steps {
		if s.Tool != tool.IssueRefund {
			continue
		}
		keys[s.Key] = true
		if s.Status == store.StepDone {
			d := done[s.Args.Order]
			done[s.Args.Order] = sum{d.n + 1, d.cents + int64(s.Args.Amount)}
		}
	}
	for _, e := range f.entries {
		if e.Kind != ledger.KindRefund {
			continue
		}
		b := booked[e.Order]
		booked[e.Order] = sum{b.n + 1, b.cents + e.Amount}
		if ceiling := person(e.By).RefundCeiling; e.Amount > int64(ceiling) {
			w.violate(InvCeiling, "ledger entry %s refunds %d cents of %s under %s's delegation, whose ceiling is %d", e.ID, e.Amount, e.Order, e.By, ceiling)
		}
		if !stepKey(e.Key) {
			w.violate(InvLedger, "ledger entry %s (%s, %d cents) was made under a key no step has", e.ID, e.Order, e.Amount)
		}
	}
	for _, o := range w.orderList {
		if done[o.ID] != booked[o.ID] {
			w.violate(InvLedger, "%s: %d done refund steps for %d cents, %d ledger entries for %d cents",
				o.ID, done[o.ID].n, done[o.ID].cents, booked[o.ID].n, booked[o.ID].cents)
		}
		if booked[o.ID].cents > o.Paid {
			w.violate(InvPaid, "%s paid %d cents and was refunded %d", o.ID, o.Paid, booked[o.ID].cents)
		}
	}
}

// checkCaps holds the rep's rolling day and the agent's rolling hour at
// the reservation time of every done refund.
func (w *world) checkCaps(f facts) {
	var refunds []store.Step
	for _, s := range f.steps {
		if s.Tool == tool.IssueRefund && s.Status == store.StepDone {
			refunds = append(refunds, s)
		}
	}
	sort.Slice(refunds, func(i, j int) bool { return refunds[i].ReservedAt.Before(refunds[j].ReservedAt) })
	within := func(at time.Time, window time.Duration, keep func(store.Step) bool) int64 {
		var total int64
		for _, r := range refunds {
			if keep(r) && r.ReservedAt.After(at.Add(-window)) && !r.ReservedAt.After(at) {
				total += int64(r.Args.Amount)
			}
		}
		return total
	}
	for _, s := range refunds {
		if f.unbound[fmt.Sprintf("%s/%d", s.Workflow, s.N)] {
			continue // its bundle had caps a hundred times larger; the steps after it still count it
		}
		rep := f.wfRep[s.Workflow]
		if t := within(s.ReservedAt, w.limits.RepWindow, func(r store.Step) bool { return f.wfRep[r.Workflow] == rep }); t > int64(w.limits.RepDaily) {
			w.violate(InvRepDay, "%s's refunds in the window up to %s add up to %d cents, above %d", rep, s.ReservedAt.Sub(begin), t, w.limits.RepDaily)
			return
		}
		if t := within(s.ReservedAt, time.Hour, func(store.Step) bool { return true }); t > int64(w.limits.AgentHourly) {
			w.violate(InvAgentHour, "the agent's refunds in the hour up to %s add up to %d cents, above %d", s.ReservedAt.Sub(begin), t, w.limits.AgentHourly)
			return
		}
	}
}

func (w *world) checkApprovals(f facts) {
	alone := map[string]int64{}
	for _, s := range f.steps {
		if s.Tool != tool.IssueRefund || s.Status != store.StepDone || f.unbound[fmt.Sprintf("%s/%d", s.Workflow, s.N)] {
			continue
		}
		a, ok := f.approvals[s.Approval]
		if ok && a.Status == store.ApprovalUsed && a.CallHash == engine.Binding(s.Workflow, s.Tool, s.Args) {
			continue
		}
		alone[s.Args.Order] += int64(s.Args.Amount)
	}
	for _, o := range sortedKeys(alone) {
		if alone[o] > int64(w.limits.RefundAuto) {
			w.violate(InvApproval, "%s: %d cents refunded without an approval bound to the call, above the auto limit %d", o, alone[o], w.limits.RefundAuto)
		}
	}
}

// checkApprovers holds InvApprover on every approval granted.
func (w *world) checkApprovers(f facts) {
	for _, id := range sortedKeys(f.approvals) {
		a := f.approvals[id]
		if a.Status != store.ApprovalApproved && a.Status != store.ApprovalUsed {
			continue
		}
		if p := person(a.Approver); p.Role != fixture.RoleLead || a.Approver == a.Requester {
			w.violate(InvApprover, "%s (%s/%d, requested by %s) was granted by %s, a %s", a.ID, a.Workflow, a.N, a.Requester, a.Approver, p.Role)
		}
	}
}

func (w *world) checkShipments(f facts) {
	done, shipped := map[string]int{}, map[string]int{}
	refs := map[string]int{}
	for _, s := range f.steps {
		if s.Tool == tool.ReshipOrder && s.Status == store.StepDone {
			done[s.Args.Order]++
		}
	}
	for _, sh := range f.shipments {
		if sh.Kind != orders.KindReship {
			continue
		}
		shipped[sh.Order]++
		if refs[sh.Reference]++; refs[sh.Reference] == 2 {
			w.violate(InvShipment, "reference %s of %s shipped twice", sh.Reference, sh.Order)
		}
	}
	for _, o := range w.orderList {
		if done[o.ID] != shipped[o.ID] {
			w.violate(InvShipment, "%s: %d done reship steps, %d reshipments", o.ID, done[o.ID], shipped[o.ID])
		}
		if shipped[o.ID] > 2 {
			w.violate(InvReshipLimit, "%s reshipped %d times", o.ID, shipped[o.ID])
		}
	}
}
