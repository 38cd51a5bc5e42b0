package dispatch_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign/executor/credential"
	"github.com/countersign/countersign/executor/dispatch"
	"github.com/countersign/countersign/executor/fixture"
	"github.com/countersign/countersign/executor/sim/actorcheck"
	"github.com/countersign/countersign/executor/sim/ledger"
	"github.com/countersign/countersign/executor/sim/orders"
	"github.com/countersign/countersign/executor/sim/simserver"
	"github.com/countersign/countersign/executor/tool"
)

// countingMinter is the credential Authority, counting the tokens it mints
// and optionally rewriting the claims of a given mint.
type countingMinter struct {
	a      *credential.Authority
	n      atomic.Int64
	tamper func(n int64, c *credential.Claims)
	fail   error
}

func (m *countingMinter) Mint(ctx context.Context, c credential.Claims) (string, error) {
	n := m.n.Add(1)
	if m.fail != nil {
		return "", m.fail
	}
	if m.tamper != nil {
		m.tamper(n, &c)
	}
	return m.a.Mint(ctx, c)
}

// world is a credential Authority publishing its JWKS, a ledger and an
// order system verifying against it, and a Dispatcher over them.
type world struct {
	t      *testing.T
	auth   *credential.Authority
	minter *countingMinter
	ledger *ledger.Server
	orders *orders.Server
	lurl   string
	ourl   string
}

func serve(t *testing.T, h interface{ Serve(net.Listener) error }) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = h.Serve(l) }()
	return "http://" + l.Addr().String()
}

func newWorld(t *testing.T) *world {
	t.Helper()
	auth, err := credential.Open(credential.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	jwks := httptest.NewServer(auth.JWKSHandler())
	t.Cleanup(jwks.Close)
	w := &world{t: t, auth: auth, minter: &countingMinter{a: auth}}
	dir := t.TempDir()
	w.ledger, err = ledger.Open(ledger.Options{Options: simserver.Options{DataDir: dir, JWKSURL: jwks.URL, JWKSMaxAge: time.Second, NoSync: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.ledger.Close() })
	var seed []orders.Order
	for _, o := range fixture.Orders() {
		seed = append(seed, orders.Order{ID: o.ID, Region: o.Region, Customer: o.Customer, Paid: int64(o.Paid), Status: o.Status})
	}
	w.orders, err = orders.Open(orders.Options{Options: simserver.Options{DataDir: dir, JWKSURL: jwks.URL, JWKSMaxAge: time.Second, NoSync: true}, Orders: seed})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.orders.Close() })
	w.lurl, w.ourl = serve(t, w.ledger), serve(t, w.orders)
	return w
}

func (w *world) dispatcher(edit ...func(*dispatch.Options)) *dispatch.Dispatcher {
	w.t.Helper()
	o := dispatch.Options{LedgerURL: w.lurl, OrdersURL: w.ourl, Minter: w.minter, Agent: "agent-1"}
	for _, f := range edit {
		f(&o)
	}
	d, err := dispatch.New(o)
	if err != nil {
		w.t.Fatal(err)
	}
	// Warm a kept-alive connection, so that a lost answer below happens on
	// a reused connection: the case where http.Transport would silently
	// re-send a replayable request.
	if _, err := d.Ledger().Entries(context.Background()); err != nil {
		w.t.Fatal(err)
	}
	return d
}

func (w *world) entries() []ledger.Entry {
	w.t.Helper()
	all, err := w.ledger.Entries()
	if err != nil {
		w.t.Fatal(err)
	}
	return all
}

func (w *world) shipments(order string) int {
	w.t.Helper()
	all, err := w.orders.Shipments(order)
	if err != nil {
		w.t.Fatal(err)
	}
	return len(all)
}

func refund(key string) dispatch.Call {
	return dispatch.Call{Rep: "rep-ana", Max: 50000, Tool: tool.IssueRefund, Args: tool.Args{Order: "O-1001", Amount: 3000}, Key: key}
}

func reship(order string) dispatch.Call {
	return dispatch.Call{Rep: "rep-ana", Max: 50000, Tool: tool.ReshipOrder, Args: tool.Args{Order: order}, Reference: "cs-ref-" + order}
}

func TestRefund(t *testing.T) {
	w := newWorld(t)
	d := w.dispatcher()
	res, err := d.Do(context.Background(), refund("W1/1"))
	if err != nil {
		t.Fatal(err)
	}
	e := res.Entry
	if e == nil || e.ID != "L1" || e.Amount != 3000 || e.By != "rep-ana" || e.Agent != "agent-1" || e.Key != "W1/1" || e.Replayed || res.Attempts != 1 {
		t.Fatalf("result %+v entry %+v", res, e)
	}
	got, found, err := d.Ledger().ByKey(context.Background(), "W1/1")
	if err != nil || !found || got.ID != "L1" {
		t.Fatalf("ByKey: %+v %v %v", got, found, err)
	}
	if _, found, err := d.Ledger().ByKey(context.Background(), "nope"); err != nil || found {
		t.Fatalf("ByKey(nope): %v %v", found, err)
	}
	if string(res.JSON()) == "{}" {
		t.Fatal("empty result JSON")
	}
}

// TestLostResponseRetriedWithSameKey: the answer to the first attempt is
// lost after the ledger committed; the retry with the same key and a fresh
// token replays the entry. One effect.
func TestLostResponseRetriedWithSameKey(t *testing.T) {
	w := newWorld(t)
	d := w.dispatcher()
	if err := w.ledger.SetFaults(ledger.Faults{LoseResponse: 1}); err != nil {
		t.Fatal(err)
	}
	res, err := d.Refund(context.Background(), refund("W1/1"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Attempts != 2 || !res.Entry.Replayed || w.minter.n.Load() != 2 {
		t.Fatalf("attempts %d, replayed %v, tokens %d; want 2, true, 2", res.Attempts, res.Entry.Replayed, w.minter.n.Load())
	}
	if n := len(w.entries()); n != 1 {
		t.Fatalf("%d ledger entries, want 1", n)
	}
}

// TestLostResponseFreshKeyPaysTwice is the control removed: a fresh key on
// each attempt turns the same lost answer into two refunds.
func TestLostResponseFreshKeyPaysTwice(t *testing.T) {
	for name, edit := range map[string]struct {
		opts bool
		call bool
	}{"Options.FreshKeyPerAttempt": {opts: true}, "Call.FreshKeyPerAttempt": {call: true}} {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t)
			d := w.dispatcher(func(o *dispatch.Options) { o.FreshKeyPerAttempt = edit.opts })
			if err := w.ledger.SetFaults(ledger.Faults{LoseResponse: 1}); err != nil {
				t.Fatal(err)
			}
			c := refund("W1/1")
			c.FreshKeyPerAttempt = edit.call
			res, err := d.Refund(context.Background(), c)
			if err != nil {
				t.Fatal(err)
			}
			if res.Attempts != 2 || res.Entry.Replayed {
				t.Fatalf("attempts %d replayed %v", res.Attempts, res.Entry.Replayed)
			}
			if n := len(w.entries()); n != 2 {
				t.Fatalf("%d ledger entries, want 2 (the duplicate the key would have prevented)", n)
			}
		})
	}
}

func TestRefundStillLostIsUnknown(t *testing.T) {
	w := newWorld(t)
	d := w.dispatcher()
	if err := w.ledger.SetFaults(ledger.Faults{LoseResponse: 2}); err != nil {
		t.Fatal(err)
	}
	res, err := d.Refund(context.Background(), refund("W1/1"))
	if !errors.Is(err, dispatch.ErrOutcomeUnknown) || res.Attempts != 2 {
		t.Fatalf("err %v attempts %d, want ErrOutcomeUnknown after 2", err, res.Attempts)
	}
	if n := len(w.entries()); n != 1 {
		t.Fatalf("%d entries, want 1", n)
	}
}

// A refund without a key could be posted again as a new entry: the ledger
// refuses it, and the refusal is not retried.
func TestRefundWithoutKeyIsRefused(t *testing.T) {
	w := newWorld(t)
	d := w.dispatcher()
	res, err := d.Refund(context.Background(), refund(""))
	var r *dispatch.Refused
	if !errors.As(err, &r) || r.Status != 400 || r.Code != ledger.CodeKeyMissing || res.Attempts != 1 || w.minter.n.Load() != 1 {
		t.Fatalf("err %v attempts %d tokens %d, want one attempt refused 400 %s", err, res.Attempts, w.minter.n.Load(), ledger.CodeKeyMissing)
	}
	if n := len(w.entries()); n != 0 {
		t.Fatalf("%d entries, want 0", n)
	}
}

// replayingMinter hands out the first token it minted again: a dispatcher
// that reused a token on its retry.
type replayingMinter struct {
	a     *credential.Authority
	first string
}

func (m *replayingMinter) Mint(ctx context.Context, c credential.Claims) (string, error) {
	if m.first == "" {
		tok, err := m.a.Mint(ctx, c)
		m.first = tok
		return tok, err
	}
	return m.first, nil
}

// TestRetryNeedsAFreshToken: the receivers accept a token once, so the
// retry after a lost answer works only because it mints its own; a retry
// with the first token is refused and the outcome stays unknown.
func TestRetryNeedsAFreshToken(t *testing.T) {
	w := newWorld(t)
	d := w.dispatcher(func(o *dispatch.Options) { o.Minter = &replayingMinter{a: w.auth} })
	if err := w.ledger.SetFaults(ledger.Faults{LoseResponse: 1}); err != nil {
		t.Fatal(err)
	}
	res, err := d.Refund(context.Background(), refund("W1/1"))
	if !errors.Is(err, dispatch.ErrOutcomeUnknown) || res.Attempts != 2 || !strings.Contains(err.Error(), "token_replayed") {
		t.Fatalf("err %v attempts %d, want ErrOutcomeUnknown after a retry refused as token_replayed", err, res.Attempts)
	}
	if n := len(w.entries()); n != 1 {
		t.Fatalf("%d entries, want 1 (the lost attempt's)", n)
	}
}

func TestRefusedIsNotRetried(t *testing.T) {
	w := newWorld(t)
	d := w.dispatcher()
	cases := []struct {
		name   string
		call   dispatch.Call
		status int
		code   string
	}{
		{"amount above the rep's ceiling", dispatch.Call{Rep: "rep-ana", Max: 1000, Tool: tool.IssueRefund, Args: tool.Args{Order: "O-1001", Amount: 3000}, Key: "A"}, 403, "amount_above_max"},
		{"key reused with other parameters", dispatch.Call{Rep: "rep-ana", Max: 50000, Tool: tool.IssueRefund, Args: tool.Args{Order: "O-1001", Amount: 4000}, Key: "W1/1"}, 409, "idempotency_key_reused"},
	}
	if _, err := d.Refund(context.Background(), refund("W1/1")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := w.minter.n.Load()
			res, err := d.Refund(context.Background(), tc.call)
			var r *dispatch.Refused
			if !errors.As(err, &r) || r.Status != tc.status || r.Code != tc.code || r.System != "ledger" {
				t.Fatalf("err = %v, want Refused %d %s", err, tc.status, tc.code)
			}
			if errors.Is(err, dispatch.ErrOutcomeUnknown) || res.Attempts != 1 || w.minter.n.Load()-before != 1 {
				t.Fatalf("retried a refusal: attempts %d", res.Attempts)
			}
		})
	}
	if n := len(w.entries()); n != 1 {
		t.Fatalf("%d entries", n)
	}
}

// TestRetryRefusedAfterLostStaysUnknown: when the retry is refused (here a
// token the ledger rejects), the first attempt may still have paid, so the
// answer is unknown, and not a refusal the engine would record as denied.
func TestRetryRefusedAfterLostStaysUnknown(t *testing.T) {
	w := newWorld(t)
	w.minter.tamper = func(n int64, c *credential.Claims) {
		if n == 2 {
			c.Max = 1
		}
	}
	d := w.dispatcher()
	if err := w.ledger.SetFaults(ledger.Faults{LoseResponse: 1}); err != nil {
		t.Fatal(err)
	}
	_, err := d.Refund(context.Background(), refund("W1/1"))
	var r *dispatch.Refused
	if !errors.Is(err, dispatch.ErrOutcomeUnknown) || errors.As(err, &r) {
		t.Fatalf("err = %v, want ErrOutcomeUnknown and no *Refused", err)
	}
	if n := len(w.entries()); n != 1 {
		t.Fatalf("%d entries, want 1 (the lost attempt's)", n)
	}
}

func TestReshipLostIsUnknownAndShipsOnce(t *testing.T) {
	w := newWorld(t)
	d := w.dispatcher()
	if err := w.orders.SetFaults(orders.Faults{LoseResponse: 1}); err != nil {
		t.Fatal(err)
	}
	res, err := d.Do(context.Background(), reship("O-1001"))
	if !errors.Is(err, dispatch.ErrOutcomeUnknown) || res.Attempts != 1 || w.minter.n.Load() != 1 {
		t.Fatalf("err %v attempts %d tokens %d, want ErrOutcomeUnknown after one attempt", err, res.Attempts, w.minter.n.Load())
	}
	if n := w.shipments("O-1001"); n != 1 {
		t.Fatalf("%d shipments, want exactly 1", n)
	}
	// The engine's resolution finds it by its reference.
	sh, found, err := d.ShipmentByReference(context.Background(), "O-1001", "cs-ref-O-1001")
	if err != nil || !found || sh.ID != "S1" || sh.Reference != "cs-ref-O-1001" {
		t.Fatalf("ShipmentByReference: %+v %v %v", sh, found, err)
	}
	list, err := d.Orders().Shipments(context.Background(), "O-1001")
	if err != nil || len(list) != 1 {
		t.Fatalf("Shipments: %v %v", list, err)
	}
	res, err = d.Reship(context.Background(), reship("O-1002"))
	if err != nil || res.Shipment == nil || res.Shipment.Order != "O-1002" || res.Shipment.By != "rep-ana" {
		t.Fatalf("reship: %+v %v", res, err)
	}
	all, err := d.Orders().AllShipments(context.Background())
	if err != nil || len(all) != 2 {
		t.Fatalf("AllShipments: %v %v", all, err)
	}
}

func TestLookup(t *testing.T) {
	w := newWorld(t)
	d := w.dispatcher()
	res, err := d.Do(context.Background(), dispatch.Call{Rep: "rep-cy", Tool: tool.LookupOrder, Args: tool.Args{Order: "O-1004"}})
	if err != nil || res.Order == nil || res.Order.Customer != "customer-4" || res.Order.Paid != 42000 {
		t.Fatalf("lookup: %+v %v", res, err)
	}
	_, err = d.Lookup(context.Background(), dispatch.Call{Rep: "rep-ana", Tool: tool.LookupOrder, Args: tool.Args{Order: "O-9999"}})
	if !dispatch.IsNotFound(err) {
		t.Fatalf("unknown order: %v", err)
	}
}

func TestReverse(t *testing.T) {
	w := newWorld(t)
	d := w.dispatcher()
	if _, err := d.Refund(context.Background(), refund("W1/1")); err != nil {
		t.Fatal(err)
	}
	if err := w.ledger.SetFaults(ledger.Faults{LoseResponse: 1}); err != nil {
		t.Fatal(err)
	}
	c := dispatch.Call{Rep: "lead-dee", Tool: dispatch.ReverseRefund, Entry: "L1", Key: "reverse-L1"}
	res, err := d.Do(context.Background(), c)
	if err != nil || res.Entry.Kind != "reversal" || res.Entry.Reverses != "L1" || res.Attempts != 2 {
		t.Fatalf("reverse: %+v %v", res, err)
	}
	_, err = d.Reverse(context.Background(), dispatch.Call{Rep: "lead-dee", Tool: dispatch.ReverseRefund, Entry: "L1", Key: "reverse-L1-again"})
	var r *dispatch.Refused
	if !errors.As(err, &r) || r.Code != ledger.CodeAlreadyReversed {
		t.Fatalf("second reversal: %v", err)
	}
	if n := len(w.entries()); n != 2 {
		t.Fatalf("%d entries, want 2", n)
	}
}

// TestRaisedEpoch: after the Authority raises the epoch, the next attempt's
// fresh token carries the new kid and the ledger, seeing an unknown kid,
// refreshes its JWKS once and accepts it.
func TestRaisedEpoch(t *testing.T) {
	w := newWorld(t)
	d := w.dispatcher()
	if _, err := d.Refund(context.Background(), refund("K1")); err != nil {
		t.Fatal(err)
	}
	if _, err := w.auth.Raise(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Refund(context.Background(), refund("K2")); err != nil {
		t.Fatalf("after raising the epoch: %v", err)
	}
}

func TestTransient(t *testing.T) {
	w := newWorld(t)
	// Nothing listens on a closed listener's port.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	_ = l.Close()
	d, err := dispatch.New(dispatch.Options{LedgerURL: dead, OrdersURL: dead, Minter: w.minter, Agent: "agent-1"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.Refund(context.Background(), refund("K1"))
	var tr *dispatch.Transient
	if !errors.As(err, &tr) || tr.Status != 0 || errors.Is(err, dispatch.ErrOutcomeUnknown) {
		t.Fatalf("connection refused: %v, want *Transient", err)
	}
	// A 5xx before any effect: the ledger cannot fetch the JWKS.
	lost := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(lost.Close)
	blind, err := ledger.Open(ledger.Options{Options: simserver.Options{DataDir: t.TempDir(), JWKSURL: lost.URL}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = blind.Close() })
	d, err = dispatch.New(dispatch.Options{LedgerURL: serve(t, blind), OrdersURL: dead, Minter: w.minter, Agent: "agent-1"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.Refund(context.Background(), refund("K1"))
	if !errors.As(err, &tr) || tr.Status != 503 || tr.Code != "jwks_unavailable" {
		t.Fatalf("503: %v", err)
	}
	// A minter that fails: nothing was sent.
	w.minter.fail = errors.New("key store unreadable")
	_, err = w.dispatcher().Refund(context.Background(), refund("K1"))
	if !errors.As(err, &tr) || !errors.Is(err, w.minter.fail) {
		t.Fatalf("mint failure: %v", err)
	}
}

// TestTimeoutAfterSendIsUnknown: an attempt that times out waiting for the
// answer is a lost answer, retried once with the same key.
func TestTimeoutAfterSendIsUnknown(t *testing.T) {
	w := newWorld(t)
	d := w.dispatcher(func(o *dispatch.Options) { o.AttemptTimeout = 50 * time.Millisecond })
	if err := w.ledger.SetFaults(ledger.Faults{DelayMS: 10_000}); err != nil {
		t.Fatal(err)
	}
	res, err := d.Refund(context.Background(), refund("K1"))
	if !errors.Is(err, dispatch.ErrOutcomeUnknown) || res.Attempts != 2 {
		t.Fatalf("err %v attempts %d", err, res.Attempts)
	}
}

func TestNewValidates(t *testing.T) {
	_, err := dispatch.New(dispatch.Options{})
	if err == nil {
		t.Fatal("New accepted empty options")
	}
	for _, field := range []string{"LedgerURL", "OrdersURL", "Minter", "Agent"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("the error does not name %s: %v", field, err)
		}
	}
}

// TestBindingsAgree: the minting side (tool.CallHash, ReversalHash) and the
// receiving side (actorcheck) compute the same binding for every call.
func TestBindingsAgree(t *testing.T) {
	for _, c := range []struct{ mint, receive string }{
		{tool.CallHash(tool.IssueRefund, tool.Args{Order: "O-1001", Amount: 3000}), actorcheck.RefundCall("O-1001", 3000)},
		{tool.CallHash(tool.IssueRefund, tool.Args{Order: "O-999999999999", Amount: 1}), actorcheck.RefundCall("O-999999999999", 1)},
		{tool.CallHash(tool.ReshipOrder, tool.Args{Order: "O-1002"}), actorcheck.OrderCall(actorcheck.ToolReshipOrder, "O-1002")},
		{tool.CallHash(tool.LookupOrder, tool.Args{Order: "O-1003"}), actorcheck.OrderCall(actorcheck.ToolLookupOrder, "O-1003")},
		{dispatch.ReversalHash("L3"), actorcheck.ReversalCall("L3")},
	} {
		if c.mint != c.receive {
			t.Errorf("minted %s, receiver computes %s", c.mint, c.receive)
		}
	}
}

// TestShipmentByReference finds a reship by the reference it carried, not
// another caller's shipment of the same order.
func TestShipmentByReference(t *testing.T) {
	w := newWorld(t)
	d := w.dispatcher()
	mine, other := reship("O-1001"), reship("O-1001")
	other.Reference = "cs-other"
	if _, err := d.Reship(context.Background(), other); err != nil {
		t.Fatal(err)
	}
	if sh, found, err := d.ShipmentByReference(context.Background(), "O-1001", mine.Reference); err != nil || found {
		t.Fatalf("before mine shipped: %+v found %v err %v, want not found", sh, found, err)
	}
	if _, err := d.Reship(context.Background(), mine); err != nil {
		t.Fatal(err)
	}
	if sh, found, err := d.ShipmentByReference(context.Background(), "O-1001", mine.Reference); err != nil || !found || sh.ID != "S2" {
		t.Fatalf("after: %+v found %v err %v, want S2", sh, found, err)
	}
	if _, _, err := d.ShipmentByReference(context.Background(), "O-9999", mine.Reference); !dispatch.IsNotFound(err) {
		t.Fatalf("unknown order: %v, want a 404 refusal", err)
	}
}
