package reconcile

import (
	"context"
	"fmt"

	"github.com/countersign/countersign/executor/dispatch"
	"github.com/countersign/countersign/executor/store"
)

// Records is the agent's side of the books, read as one snapshot.
type Records struct {
	Workflows []store.Workflow
	Steps     []store.Step
	Approvals []store.Approval
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

// FromStore reads the agent's records from the bbolt store in one read
// transaction, so steps and approvals are consistent with each other.
func FromStore(db *store.DB) RecordSource { return storeRecords{db} }

type storeRecords struct{ db *store.DB }

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
		r.Approvals, err = tx.Approvals(nil)
		return err
	})
	if err != nil {
		return Records{}, fmt.Errorf("read the agent's records: %w", err)
	}
	return r, nil
}
