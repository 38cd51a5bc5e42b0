package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/bundles"
	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/fixture"
	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/simclock"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

// fakeSystems is an in-memory ledger and order system for the engine's
// unit tests: idempotent by key, with a ceiling check and a lost-response
// fault. The real ones, over HTTP, are exercised in sidecar and tests/.
type fakeSystems struct {
	mu        sync.Mutex
	orders    map[string]policy.Order
	entries   map[string]money.Cents // by key
	refunds   int                    // entries made
	shipments map[string]int
	byRef     map[string]int // shipments by reference
	reversals []string
	loseNext  int // lose the response of the next N effects, after committing them
	dropNext  int // answer the next N effects as unknown without making them (still in flight)
	failNext  int // fail the next N effects before making them, as an unreachable system would
}

func newFake() *fakeSystems {
	f := &fakeSystems{orders: map[string]policy.Order{}, entries: map[string]money.Cents{}, shipments: map[string]int{}, byRef: map[string]int{}}
	for _, o := range fixture.Orders() {
		f.orders[o.ID] = policy.Order{ID: o.ID, Region: o.Region, Customer: o.Customer, Paid: o.Paid, Status: o.Status}
	}
	return f
}

func (f *fakeSystems) Order(_ context.Context, _ engine.Actor, id string) (policy.Order, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	o, ok := f.orders[id]
	if !ok {
		return o, engine.ErrOrderNotFound
	}
	return o, nil
}

func (f *fakeSystems) Shipments(_ context.Context, order string) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.shipments[order], nil
}

func (f *fakeSystems) RefundByKey(_ context.Context, key string) (json.RawMessage, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	amt, ok := f.entries[key]
	return json.RawMessage(fmt.Sprintf(`{"amount":%d}`, amt)), ok, nil
}

// ShipmentByReference finds a reship by its reference.
func (f *fakeSystems) ShipmentByReference(_ context.Context, order, ref string) (json.RawMessage, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.byRef[ref] == 0 {
		return nil, false, nil
	}
	return json.RawMessage(fmt.Sprintf(`{"order":%q,"reference":%q}`, order, ref)), true, nil
}

func (f *fakeSystems) Execute(_ context.Context, as engine.Actor, c engine.Call) (json.RawMessage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dropNext > 0 {
		f.dropNext--
		return nil, engine.ErrOutcomeUnknown
	}
	if f.failNext > 0 {
		f.failNext--
		return nil, errors.New("connection refused")
	}
	var result json.RawMessage
	switch c.Tool {
	case tool.IssueRefund:
		if c.Args.Amount > as.Ceiling {
			return nil, &engine.Refused{Status: 403, Code: "amount_above_max", Message: "over the rep's ceiling"}
		}
		key := c.Key
		if c.FreshKeyPerAttempt {
			key = fmt.Sprintf("%s-%d", key, f.refunds)
		}
		if _, ok := f.entries[key]; !ok {
			f.entries[key] = c.Args.Amount
			f.refunds++
		}
		result = json.RawMessage(fmt.Sprintf(`{"id":"L%d","key":%q,"amount":%d}`, f.refunds, key, c.Args.Amount))
	case tool.ReshipOrder:
		f.shipments[c.Args.Order]++
		f.byRef[c.Reference]++
		result = json.RawMessage(fmt.Sprintf(`{"order":%q,"reference":%q}`, c.Args.Order, c.Reference))
	default:
		result = json.RawMessage(`{}`)
	}
	if f.loseNext > 0 {
		f.loseNext--
		return nil, engine.ErrOutcomeUnknown
	}
	return result, nil
}

func (f *fakeSystems) Reverse(_ context.Context, as engine.Actor, entry, key string) (json.RawMessage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reversals = append(f.reversals, entry)
	return json.RawMessage(fmt.Sprintf(`{"kind":"reversal","reverses":%q,"by":%q}`, entry, as.Rep)), nil
}

type harness struct {
	t       testing.TB
	dir     string
	db      *store.DB
	pol     *policy.Engine
	sys     *fakeSystems
	clock   *simclock.Clock
	eng     *engine.Engine
	control engine.Controls
}

func newHarness(t testing.TB, controls engine.Controls) *harness {
	h := &harness{t: t, dir: t.TempDir(), sys: newFake(), clock: simclock.New(time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)), control: controls}
	h.pol = policy.New(policy.Options{Clock: h.clock, Timeout: 5 * time.Second}) // not the 100 ms default: a loaded CI machine is slow
	p1, err := bundles.Open("p1")
	if err != nil {
		t.Fatal(err)
	}
	b, err := policy.LoadFS(p1)
	if err != nil {
		t.Fatal(err)
	}
	h.pol.Restore(b)
	h.open()
	t.Cleanup(func() { h.db.Close() })
	return h
}

// open (re)opens the engine over the same store file, as a restart would.
func (h *harness) open() {
	if h.db != nil {
		h.db.Close()
	}
	db, err := store.Open(filepath.Join(h.dir, "state.db"), store.Options{})
	if err != nil {
		h.t.Fatal(err)
	}
	h.db = db
	c := h.control
	h.eng = engine.New(engine.Options{Store: db, Policy: h.pol, Systems: h.sys, Clock: h.clock, Controls: &c})
}

func person(id string) engine.Person {
	p, _ := fixture.PersonByID(id)
	return engine.Person{ID: p.ID, Role: p.Role, Region: p.Region, Scopes: p.Scopes, RefundCeiling: p.RefundCeiling, ApproveLimit: p.ApproveLimit}
}

func (h *harness) workflow(rep, id string) {
	h.t.Helper()
	if _, _, err := h.eng.CreateWorkflow(context.Background(), person(rep), id, "T-"+id); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) propose(rep, wf string, name tool.Name, args string) store.Step {
	h.t.Helper()
	s, err := h.eng.Propose(context.Background(), person(rep), wf, name, json.RawMessage(args))
	if err != nil {
		h.t.Fatalf("propose %s %s: %v", name, args, err)
	}
	return s
}
