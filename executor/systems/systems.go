// Package systems is the engine's view of the systems of record: it
// implements engine.Systems over the dispatch clients, translating
// dispatch's error classes into the engine's.
package systems

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/countersign/countersign/executor/dispatch"
	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/tool"
)

// Options are dispatch's.
type Options = dispatch.Options

// Systems implements engine.Systems.
type Systems struct {
	d *dispatch.Dispatcher
}

var _ engine.Systems = (*Systems)(nil)

// New returns Systems over a new dispatcher.
func New(o Options) (*Systems, error) {
	d, err := dispatch.New(o)
	if err != nil {
		return nil, err
	}
	return &Systems{d: d}, nil
}

// Dispatcher exposes the clients (reconciliation and compensation read and
// reverse through them).
func (s *Systems) Dispatcher() *dispatch.Dispatcher { return s.d }

// Order reads the order with a lookup token of the rep.
func (s *Systems) Order(ctx context.Context, as engine.Actor, order string) (policy.Order, error) {
	res, err := s.d.Lookup(ctx, dispatch.Call{Rep: as.Rep, Max: as.Ceiling, Tool: tool.LookupOrder, Args: tool.Args{Order: order}})
	if err != nil {
		if dispatch.IsNotFound(err) {
			return policy.Order{}, fmt.Errorf("%s: %w", order, engine.ErrOrderNotFound)
		}
		return policy.Order{}, translate(err)
	}
	o := res.Order
	out := policy.Order{ID: o.ID, Region: o.Region, Customer: o.Customer, Paid: o.Paid, Status: o.Status,
		PlacedAt: o.PlacedAt, ShippedAt: o.ShippedAt}
	for _, l := range o.Lines {
		out.Lines = append(out.Lines, policy.Line(l))
	}
	return out, nil
}

// Shipments counts the order's shipments.
func (s *Systems) Shipments(ctx context.Context, order string) (int, error) {
	list, err := s.d.Orders().Shipments(ctx, order)
	if err != nil {
		return 0, translate(err)
	}
	return len(list), nil
}

// RefundByKey finds the ledger entry made with key.
func (s *Systems) RefundByKey(ctx context.Context, key string) (json.RawMessage, bool, error) {
	e, found, err := s.d.Ledger().ByKey(ctx, key)
	if err != nil || !found {
		return nil, false, translate(err)
	}
	b, err := json.Marshal(e)
	return b, true, err
}

// ShipmentByReference finds the order's shipment made under ref.
func (s *Systems) ShipmentByReference(ctx context.Context, order, ref string) (json.RawMessage, bool, error) {
	sh, found, err := s.d.ShipmentByReference(ctx, order, ref)
	if err != nil || !found {
		return nil, false, translate(err)
	}
	b, err := json.Marshal(sh)
	return b, true, err
}

// Execute performs the call.
func (s *Systems) Execute(ctx context.Context, as engine.Actor, c engine.Call) (json.RawMessage, error) {
	res, err := s.d.Do(ctx, dispatch.Call{
		Rep: as.Rep, Max: as.Ceiling, Tool: c.Tool, Args: c.Args, Key: c.Key, Reference: c.Reference,
		FreshKeyPerAttempt: c.FreshKeyPerAttempt, NotAfter: c.NotAfter,
	})
	if err != nil {
		return nil, translate(err)
	}
	return res.JSON(), nil
}

// translate keeps the classes apart: unknown first (it may hide a refusal
// on a retry after a lost answer), then refused, then everything else,
// which means nothing happened.
func translate(err error) error {
	var r *dispatch.Refused
	switch {
	case err == nil:
		return nil
	case errors.Is(err, dispatch.ErrOutcomeUnknown):
		return fmt.Errorf("%w: %v", engine.ErrOutcomeUnknown, err)
	case errors.As(err, &r):
		return &engine.Refused{Status: r.Status, Code: r.Code, Message: r.Message}
	}
	return err
}

// Reverse posts a reversal of a ledger entry under the lead's authority.
func (s *Systems) Reverse(ctx context.Context, as engine.Actor, entry, key string) (json.RawMessage, error) {
	res, err := s.d.Reverse(ctx, dispatch.Call{Rep: as.Rep, Max: as.Ceiling, Tool: dispatch.ReverseRefund, Entry: entry, Key: key})
	if err != nil {
		return nil, translate(err)
	}
	return res.JSON(), nil
}
