package dispatch

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/countersign/countersign/executor/credential"
	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/tool"
)

// Minter mints one actor token per dispatch attempt. The credential
// Authority is the production Minter.
type Minter interface {
	Mint(ctx context.Context, c credential.Claims) (string, error)
}

var _ Minter = (*credential.Authority)(nil)

// ReverseRefund is the pseudo-tool of a ledger reversal: the binding its
// tokens carry is hex(sha256("reverse_refund\n" + {"entry":"L3"})) and its
// scope is "reverse". It is not in the agent's tool catalog: reversals are a
// person's remediation, run through the same credential path.
const ReverseRefund tool.Name = "reverse_refund"

// DefaultAttemptTimeout bounds one attempt when Options.AttemptTimeout is
// zero. An attempt that times out after its request was sent is a lost
// answer.
const DefaultAttemptTimeout = 10 * time.Second

// Options configure a Dispatcher. LedgerURL, OrdersURL, Minter and Agent
// are required.
type Options struct {
	LedgerURL string // the ledger's base URL, http://host:port
	OrdersURL string // the order system's base URL
	// HTTPClient carries every request. Nil means DefaultHTTPClient.
	HTTPClient *http.Client
	Minter     Minter
	// Agent is the act.sub of every token: the agent acting for the rep.
	Agent string
	// AttemptTimeout bounds each attempt. Zero means DefaultAttemptTimeout.
	AttemptTimeout time.Duration
	// Logger receives one line per attempt that fails (never a token).
	// Nil discards.
	Logger *slog.Logger
	// FreshKeyPerAttempt sends a new idempotency key on every attempt
	// instead of the caller's stable key. It exists ONLY for the tests that
	// remove the idempotency control; nothing reachable from configuration
	// sets it.
	FreshKeyPerAttempt bool
}

// Dispatcher makes the engine's calls to the systems of record under the
// retry rules of the package doc. It is safe for concurrent use.
type Dispatcher struct {
	ledger    *Ledger
	orders    *Orders
	minter    Minter
	agent     string
	timeout   time.Duration
	log       *slog.Logger
	freshKeys bool
}

// New returns a Dispatcher for o.
func New(o Options) (*Dispatcher, error) {
	var missing []error
	for name, empty := range map[string]bool{
		"LedgerURL": o.LedgerURL == "", "OrdersURL": o.OrdersURL == "",
		"Minter": o.Minter == nil, "Agent": o.Agent == "",
	} {
		if empty {
			missing = append(missing, fmt.Errorf("dispatch: Options.%s is required", name))
		}
	}
	if err := errors.Join(missing...); err != nil {
		return nil, err
	}
	hc := o.HTTPClient
	if hc == nil {
		hc = DefaultHTTPClient()
	}
	d := &Dispatcher{
		ledger: NewLedger(o.LedgerURL, hc), orders: NewOrders(o.OrdersURL, hc),
		minter: o.Minter, agent: o.Agent, timeout: o.AttemptTimeout, log: o.Logger,
		freshKeys: o.FreshKeyPerAttempt,
	}
	if d.timeout == 0 {
		d.timeout = DefaultAttemptTimeout
	}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	d.log = d.log.With("component", "dispatch")
	return d, nil
}

// Ledger is the ledger client, for lookups (ByKey, Entries).
func (d *Dispatcher) Ledger() *Ledger { return d.ledger }

// Orders is the order-system client, for lookups (Shipments).
func (d *Dispatcher) Orders() *Orders { return d.orders }

// Call is one effect (or read) to dispatch for a rep.
type Call struct {
	// Rep is the representative whose delegation is used (sub).
	Rep string
	// Max is the rep's refund ceiling (the max claim), enforced by the
	// ledger against the amount.
	Max money.Cents
	// Tool is issue_refund, reship_order, lookup_order or ReverseRefund.
	Tool tool.Name
	// Args are the normalized arguments (order, amount; for a line-item
	// refund also its line and quantity, which the token binds).
	Args tool.Args
	// Entry is the ledger entry to reverse (ReverseRefund only).
	Entry string
	// Key is the stable idempotency key of a ledger call; empty means no
	// key, and then a lost answer is not retried (the ledger refuses a
	// refund without one). Each attempt's token names the key it sends.
	Key string
	// Reference names a reshipment (reship_order only): sent in the body,
	// bound in the token, stored with the shipment, so that a lost answer
	// can be resolved by ShipmentByReference.
	Reference string
	// FreshKeyPerAttempt: see Options.FreshKeyPerAttempt (either turns it
	// on). Only the tests that remove the idempotency control set it.
	FreshKeyPerAttempt bool
	// NotAfter, when set, bounds the exp of every token the call's
	// attempts carry (credential.Claims.NotAfter): the step's token
	// deadline. An attempt that would need a token past it is not sent
	// (a *Transient: nothing happened).
	NotAfter time.Time
}

// Result is what a dispatched call produced: one of Entry, Shipment or
// Order, and how many attempts it took.
type Result struct {
	Entry    *Entry    `json:"entry,omitempty"`
	Shipment *Shipment `json:"shipment,omitempty"`
	Order    *Order    `json:"order,omitempty"`
	Attempts int       `json:"attempts"`
}

// JSON is the system of record's answer as the engine records it: the
// entry, shipment or order object.
func (r Result) JSON() json.RawMessage {
	var v any
	switch {
	case r.Entry != nil:
		v = r.Entry
	case r.Shipment != nil:
		v = r.Shipment
	case r.Order != nil:
		v = r.Order
	default:
		return json.RawMessage(`{}`)
	}
	b, _ := json.Marshal(v) // plain structs of strings, integers and times
	return b
}

// Do dispatches c by its tool.
func (d *Dispatcher) Do(ctx context.Context, c Call) (Result, error) {
	switch c.Tool {
	case tool.IssueRefund:
		return d.Refund(ctx, c)
	case ReverseRefund:
		return d.Reverse(ctx, c)
	case tool.ReshipOrder:
		return d.Reship(ctx, c)
	case tool.LookupOrder:
		return d.Lookup(ctx, c)
	}
	return Result{}, fmt.Errorf("dispatch: unknown tool %q", c.Tool)
}

// Refund posts c as a ledger refund: attempt, and on a lost answer one
// retry with the same key and a fresh token.
func (d *Dispatcher) Refund(ctx context.Context, c Call) (Result, error) {
	claims := d.claims(c, tool.CallHash(tool.IssueRefund, c.Args))
	claims.Line, claims.Quantity = c.Args.Line, c.Args.Quantity
	return d.ledgerWrite(ctx, c, claims, func(ctx context.Context, key, token string) (Entry, error) {
		return d.ledger.Refund(ctx, key, c.Args, token)
	})
}

// Reverse posts a reversal of c.Entry, under the same rules as Refund.
func (d *Dispatcher) Reverse(ctx context.Context, c Call) (Result, error) {
	claims := d.claims(c, ReversalHash(c.Entry))
	return d.ledgerWrite(ctx, c, claims, func(ctx context.Context, key, token string) (Entry, error) {
		return d.ledger.Reverse(ctx, key, c.Entry, token)
	})
}

func (d *Dispatcher) ledgerWrite(ctx context.Context, c Call, claims credential.Claims, send func(ctx context.Context, key, token string) (Entry, error)) (Result, error) {
	tries := 1
	if c.Key != "" {
		tries = 2 // the key makes a retry safe
	}
	var (
		lost error
		made int
	)
	for n := 1; n <= tries; n++ {
		made = n
		key := c.Key
		if key != "" && (d.freshKeys || c.FreshKeyPerAttempt) {
			key = freshKey(c.Key)
		}
		claims.Key = key // the ledger refuses the token with any other key
		e, err := attempt(ctx, d, claims, func(ctx context.Context, token string) (Entry, error) { return send(ctx, key, token) })
		if err == nil {
			return Result{Entry: &e, Attempts: n}, nil
		}
		d.log.Warn("ledger attempt failed", "tool", c.Tool, "order", c.Args.Order, "attempt", n, "err", err)
		if lost != nil {
			// The first attempt may have taken effect, whatever this one
			// says, so this error must not read as a refusal (%v, not %w).
			return Result{Attempts: n}, fmt.Errorf("%w; the retry with the same key failed too: %v", lost, err)
		}
		if !errors.Is(err, ErrOutcomeUnknown) {
			return Result{Attempts: n}, err
		}
		lost = err
		if ctx.Err() != nil {
			break // the caller gave up: no retry
		}
	}
	return Result{Attempts: made}, lost
}

// Reship asks the order system for a shipment under c.Reference: one
// attempt; a lost answer is ErrOutcomeUnknown.
func (d *Dispatcher) Reship(ctx context.Context, c Call) (Result, error) {
	claims := d.claims(c, tool.CallHash(tool.ReshipOrder, tool.Args{Order: c.Args.Order}))
	claims.Reference = c.Reference
	sh, err := attempt(ctx, d, claims, func(ctx context.Context, token string) (Shipment, error) {
		return d.orders.Reship(ctx, c.Args.Order, c.Reference, token)
	})
	if err != nil {
		d.log.Warn("reship failed", "order", c.Args.Order, "err", err)
		return Result{Attempts: 1}, err
	}
	return Result{Shipment: &sh, Attempts: 1}, nil
}

// ShipmentByReference finds the shipment of order made under reference
// ref; found is false when the order system has none.
func (d *Dispatcher) ShipmentByReference(ctx context.Context, order, ref string) (sh Shipment, found bool, err error) {
	list, err := d.orders.ShipmentsByReference(ctx, order, ref)
	if err != nil || len(list) == 0 {
		return Shipment{}, false, err
	}
	if len(list) > 1 {
		// One reference, two shipments: the step was dispatched again
		// after a lookup that its first request outran. Report the
		// first; reconciliation shows the count.
		d.log.Warn("several shipments carry one reference", "order", order, "reference", ref, "shipments", len(list))
	}
	return list[0], true, nil
}

// Lookup reads an order: one attempt. An unknown order is a *Refused with
// NotFound true.
func (d *Dispatcher) Lookup(ctx context.Context, c Call) (Result, error) {
	claims := d.claims(c, tool.CallHash(tool.LookupOrder, tool.Args{Order: c.Args.Order}))
	o, err := attempt(ctx, d, claims, func(ctx context.Context, token string) (Order, error) {
		return d.orders.Order(ctx, c.Args.Order, token)
	})
	if err != nil {
		return Result{Attempts: 1}, err
	}
	return Result{Order: &o, Attempts: 1}, nil
}

// claims are what c's tokens carry: the tool's audience and scope, the
// rep's ceiling and the call binding.
func (d *Dispatcher) claims(c Call, binding string) credential.Claims {
	aud, scope := "ledger", "reverse"
	if spec, ok := tool.Lookup(c.Tool); ok {
		aud, scope = spec.Audience, spec.Scope
	}
	return credential.Claims{Subject: c.Rep, Agent: d.agent, Audience: aud, Scope: scope, Max: c.Max, Call: binding, NotAfter: c.NotAfter}
}

// attempt mints a fresh token and makes one bounded request with it.
func attempt[T any](ctx context.Context, d *Dispatcher, claims credential.Claims, send func(ctx context.Context, token string) (T, error)) (T, error) {
	var zero T
	token, err := d.minter.Mint(ctx, claims)
	if err != nil {
		return zero, &Transient{System: claims.Audience, Message: "could not mint an actor token", Err: err}
	}
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	return send(ctx, token)
}

// ReversalHash is the binding of a reversal of entry:
// hex(sha256("reverse_refund\n" + {"entry":<entry>})).
func ReversalHash(entry string) string {
	args, _ := json.Marshal(map[string]string{"entry": entry}) // a string map cannot fail
	sum := sha256.Sum256(append([]byte(string(ReverseRefund)+"\n"), args...))
	return hex.EncodeToString(sum[:])
}

// freshKey derives a never-repeated key from a stable one (the control
// removal switch only).
func freshKey(key string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return key + "/attempt-" + hex.EncodeToString(b[:])
}
