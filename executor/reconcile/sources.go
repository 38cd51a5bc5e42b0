package reconcile

import (
	"context"
	"fmt"

	"github.com/countersign/countersign/executor/dispatch"
	"github.com/countersign/countersign/executor/release"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

// Records is the agent's side of the books, read as one snapshot.
type Records struct {
	Workflows []store.Workflow
	Steps     []store.Step
	Approvals []store.Approval
	// HeldTo is, for a refund step that executed above the strictest
	// auto limit known, the limit of the bundle whose decision let it run
	// (release.Limits). Classify holds a step missing here to its
	// autoLimit, as it held every step before bundles were told apart.
	HeldTo map[StepRef]release.Held
}

// RecordSource reads the agent's records.
type RecordSource interface {
	Records(ctx context.Context) (Records, error)
}

// Ledger lists every ledger entry. *dispatch.Ledger is one.
type Ledger interface {
	Entries(ctx context.Context) ([]dispatch.Entry, error)
}

// Shipments lists every shipment of every order. *dispatch.Orders is one.
type Shipments interface {
	AllShipments(ctx context.Context) ([]dispatch.Shipment, error)
}

// RecordsFunc adapts a function to a RecordSource.
type RecordsFunc func(ctx context.Context) (Records, error)

// Records calls f.
func (f RecordsFunc) Records(ctx context.Context) (Records, error) { return f(ctx) }

// LedgerFunc adapts a function to a Ledger.
type LedgerFunc func(ctx context.Context) ([]dispatch.Entry, error)

// Entries calls f.
func (f LedgerFunc) Entries(ctx context.Context) ([]dispatch.Entry, error) { return f(ctx) }

// ShipmentsFunc adapts a function to a Shipments source.
type ShipmentsFunc func(ctx context.Context) ([]dispatch.Shipment, error)

// AllShipments calls f.
func (f ShipmentsFunc) AllShipments(ctx context.Context) ([]dispatch.Shipment, error) { return f(ctx) }

// Interface guards: the dispatch clients plug in as they are.
var (
	_ Ledger       = (*dispatch.Ledger)(nil)
	_ Shipments    = (*dispatch.Orders)(nil)
	_ RecordSource = storeRecords{}
	_ RecordSource = RecordsFunc(nil)
	_ Ledger       = LedgerFunc(nil)
	_ Shipments    = ShipmentsFunc(nil)
)

// FromStore reads the agent's records from the store in one read
// transaction, so steps and approvals are consistent with each other,
// and looks up in the decision log and the bundle history the limit each
// refund above the strictest auto limit known is held to (Records.HeldTo).
// The limits of each bundle are loaded once, for the life of the source.
func FromStore(db *store.DB) RecordSource { return storeRecords{db, release.NewLimits()} }

type storeRecords struct {
	db     *store.DB
	limits *release.Limits
}

func (s storeRecords) Records(ctx context.Context) (Records, error) {
	if err := ctx.Err(); err != nil {
		return Records{}, err
	}
	s.db.Flush() // the records of steps already answered done
	var r Records
	err := s.db.View(func(tx *store.Tx) error {
		var err error
		if r.Workflows, err = tx.Workflows(nil); err != nil {
			return err
		}
		if err := tx.AllSteps(func(st store.Step) error { r.Steps = append(r.Steps, st); return nil }); err != nil {
			return err
		}
		if r.Approvals, err = tx.Approvals(nil); err != nil {
			return err
		}
		r.HeldTo, err = s.heldTo(tx, r.Steps)
		return err
	})
	if err != nil {
		return Records{}, fmt.Errorf("read the agent's records: %w", err)
	}
	return r, nil
}

// heldTo looks up the limit each refund step that may have executed
// (done, started or unknown) above the strictest auto limit known is held
// to. A refund at or under that limit is within every limit the history
// has known and needs no look-up; a compensated one is never a finding.
func (s storeRecords) heldTo(tx *store.Tx, steps []store.Step) (map[StepRef]release.Held, error) {
	book, err := s.limits.Read(tx)
	if err != nil {
		return nil, err
	}
	out := map[StepRef]release.Held{}
	for _, st := range steps {
		switch {
		case st.Tool != tool.IssueRefund, st.Args.Amount <= book.Strictest():
			continue
		case st.Status != store.StepDone && st.Status != store.StepStarted && st.Status != store.StepUnknown:
			continue
		}
		h, err := book.Step(tx, st.Workflow, st.N)
		if err != nil {
			return nil, err
		}
		out[StepRef{Workflow: st.Workflow, N: st.N, Order: st.Args.Order}] = h
	}
	return out, nil
}
