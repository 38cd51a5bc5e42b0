package demo

import (
	"context"
	"errors"
	"fmt"

	"github.com/countersign/countersign/executor/dispatch"
	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/reconcile"
	"github.com/countersign/countersign/executor/sim/ledger"
	"github.com/countersign/countersign/executor/tool"
)

// Seeded is one difference the reconciliation section plants, and the
// class it must land in.
type Seeded struct {
	How   string          `json:"how"`
	Class reconcile.Class `json:"class"`
}

// Reconciliation is the reconciliation section: a report over clean work
// and one planted example of every failure class, then a second report
// after the stack restarted over the same directory and resumed.
type Reconciliation struct {
	Seeded []Seeded         `json:"seeded"`
	Before reconcile.Report `json:"before"`
	After  reconcile.Report `json:"after_restart"`
}

// RunReconciliation plants every failure class through the systems of
// record's faults, the engine's failpoints, manual entries and a
// break-glass release (never by writing records), runs the job, restarts
// the stack and runs it again.
func RunReconciliation(ctx context.Context, dir string) (Reconciliation, error) {
	var out Reconciliation
	fp := &failpoint{}
	clock := newClock()
	st, err := start(ctx, dir, setup{controls: Without(), clock: clock, failpoint: fp.hook})
	if err != nil {
		return out, err
	}
	defer st.Close() // a second Close is harmless

	refund := func(rep, wf, order string, amount money.Cents) error {
		if err := st.open(ctx, rep, wf); err != nil {
			return err
		}
		s, err := st.propose(ctx, rep, wf, tool.IssueRefund, refundArgs(order, amount))
		if err == nil && s.Status != "done" {
			err = fmt.Errorf("%s: refund of %s on %s is %s (%s), want done", wf, amount, order, s.Status, s.Note)
		}
		return err
	}
	crash := func(point, rep, wf, order string, amount money.Cents) error {
		if err := st.open(ctx, rep, wf); err != nil {
			return err
		}
		fp.arm(point)
		if _, err := st.Engine.Propose(ctx, person(rep), wf, tool.IssueRefund, refundArgs(order, amount)); !errors.Is(err, engine.ErrCrashed) {
			return fmt.Errorf("%s: no crash at %s: %v", wf, point, err)
		}
		return nil
	}
	// Work the records agree on.
	for _, r := range []struct {
		rep, wf, order string
		amount         money.Cents
	}{{"rep-ana", "W-ok-1", "O-1002", 1000}, {"rep-ben", "W-ok-2", "O-1004", 1000}, {"rep-ben", "W-ok-3", "O-1003", 500}} {
		if err := refund(r.rep, r.wf, r.order, r.amount); err != nil {
			return out, err
		}
	}
	if err := st.open(ctx, "rep-ben", "W-ship"); err != nil {
		return out, err
	}
	if _, err := st.propose(ctx, "rep-ben", "W-ship", tool.ReshipOrder, orderArgs("O-1003")); err != nil {
		return out, err
	}

	steps := []struct {
		how   string
		class reconcile.Class
		do    func() error
	}{
		{"the ledger acknowledges W-lost's $10.00 refund and keeps nothing", reconcile.AgentDoneLedgerMissing, func() error {
			if err := st.Ledger.SetFaults(ledger.Faults{LoseWrite: 1}); err != nil {
				return err
			}
			return refund("rep-ben", "W-lost", "O-1003", 1000)
		}},
		{"the ledger's adapter books W-units' $20.00 as $2.00", reconcile.AmountMismatch, func() error {
			if err := st.Ledger.SetFaults(ledger.Faults{WrongAmount: 1}); err != nil {
				return err
			}
			return refund("rep-ana", "W-units", "O-1005", 2000)
		}},
		{"a finance clerk refunds $50.00 on O-1002 by hand", reconcile.LedgerEntryWithoutStep, func() error {
			_, err := st.Ledger.AddExternal("O-1002", 5000, "finance-clerk")
			return err
		}},
		{"W-crash-after dies after the ledger took its refund, before recording it", reconcile.InFlightLedgerHasIt, func() error {
			return crash("after_dispatch", "rep-ana", "W-crash-after", "O-1002", 1500)
		}},
		{"W-crash-before dies after its write-ahead mark, before sending", reconcile.InFlightLedgerLacksIt, func() error {
			return crash("before_dispatch", "rep-ben", "W-crash-before", "O-1004", 1500)
		}},
		{"a break-glass release of p2 lets W-p2 refund $120.00 with no approval", reconcile.RefundOverLimitWithoutApproval, func() error {
			return withBundle(ctx, st, "p2", func() error { return refund("rep-ana", "W-p2", "O-1001", 12000) })
		}},
		{"the warehouse ships O-1004 again outside countersign", reconcile.ShipmentCountMismatch, func() error {
			_, err := st.Orders.AddExternalShipment("O-1004", "warehouse")
			return err
		}},
	}
	for _, s := range steps {
		out.Seeded = append(out.Seeded, Seeded{How: s.how, Class: s.class})
		if err := s.do(); err != nil {
			return out, fmt.Errorf("seed %s: %w", s.class, err)
		}
	}
	if out.Before, err = reconcileOnce(ctx, st); err != nil {
		return out, err
	}

	if err := st.Close(); err != nil {
		return out, err
	}
	// The successor resumes both in-flight refunds at start.
	st2, err := start(ctx, dir, setup{controls: Without(), clock: clock})
	if err != nil {
		return out, err
	}
	defer st2.Close()
	out.After, err = reconcileOnce(ctx, st2)
	return out, err
}

func reconcileOnce(ctx context.Context, st *stack) (reconcile.Report, error) {
	j, err := reconcile.New(reconcile.Options{
		Records:   reconcile.FromStore(st.Store),
		Ledger:    dispatch.NewLedger(st.Endpoints.Ledger, nil),
		Shipments: dispatch.NewOrders(st.Endpoints.Orders, nil),
		Clock:     st.clock,
	})
	if err != nil {
		return reconcile.Report{}, err
	}
	return j.Run(ctx)
}

// withBundle runs do with the embedded bundle name activated by break
// glass, then puts p1 back by break glass too: the gate compares a
// candidate's limits with the active bundle's, and the released p1 cannot
// declare the change back from another bundle's.
func withBundle(ctx context.Context, st *stack, name string, do func() error) error {
	b, err := LoadBundle(name)
	if err != nil {
		return err
	}
	if _, err := st.Releases.ActivateBundle(ctx, b, policy.Activation{By: "ops-jon", Proposer: "ops-ida", BreakGlass: true,
		Reason: "demo: release " + name + " without its gate"}); err != nil {
		return fmt.Errorf("break-glass %s: %w", name, err)
	}
	runErr := do()
	p1, err := LoadBundle("p1")
	if err != nil {
		return errors.Join(runErr, err)
	}
	if _, err := st.Releases.ActivateBundle(ctx, p1, policy.Activation{By: "ops-ida", Rollback: true}); err != nil {
		return errors.Join(runErr, fmt.Errorf("restore p1: %w", err))
	}
	return runErr
}
