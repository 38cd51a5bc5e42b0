package dispatch

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/tool"
)

// Entry is a ledger entry as the ledger answers it.
type Entry struct {
	ID       string      `json:"id"`
	Kind     string      `json:"kind"` // refund, reversal or external
	Order    string      `json:"order"`
	Amount   money.Cents `json:"amount"`
	Line     string      `json:"line,omitempty"`
	Quantity int64       `json:"quantity,omitempty"`
	Key      string      `json:"key"`
	By       string      `json:"by"`
	Agent    string      `json:"agent,omitempty"`
	Reverses string      `json:"reverses,omitempty"`
	At       time.Time   `json:"at"`
	// Replayed is true when the ledger answered a recorded entry for a
	// repeated idempotency key (a 200 rather than a 201).
	Replayed bool `json:"-"`
}

// Order is an order as the order system answers it. PlacedAt and
// ShippedAt are zero when the order system does not say (an order not
// shipped has no shipped_at).
type Order struct {
	ID        string      `json:"id"`
	Region    string      `json:"region"`
	Customer  string      `json:"customer"`
	Paid      money.Cents `json:"paid"`
	Status    string      `json:"status"`
	Lines     []Line      `json:"lines"`
	PlacedAt  time.Time   `json:"placed_at,omitzero"`
	ShippedAt time.Time   `json:"shipped_at,omitzero"`
}

// Line is one line of an order as the order system answers it.
type Line struct {
	ID               string      `json:"id"`
	SKU              string      `json:"sku"`
	Description      string      `json:"description"`
	UnitAmount       money.Cents `json:"unit_amount"`
	Quantity         int64       `json:"quantity"`
	RefundedQuantity int64       `json:"refunded_quantity"`
}

// Shipment is one shipment of an order.
type Shipment struct {
	ID        string    `json:"id"`
	Kind      string    `json:"kind"` // reship or external
	Order     string    `json:"order"`
	Reference string    `json:"reference,omitempty"` // the reship's reference
	By        string    `json:"by"`
	Agent     string    `json:"agent,omitempty"`
	At        time.Time `json:"at"`
}

// Ledger is a client of the ledger's HTTP API. Each method makes exactly
// one request; retries are the Dispatcher's.
type Ledger struct{ c client }

// NewLedger returns a client of the ledger at baseURL (http://host:port).
// A nil hc means DefaultHTTPClient.
func NewLedger(baseURL string, hc *http.Client) *Ledger {
	return &Ledger{c: newClient("ledger", baseURL, hc)}
}

// Refund posts a refund of a (order and amount, and for a line-item
// refund its line and quantity) with an idempotency key (none when empty)
// and an actor token bound to that call.
func (l *Ledger) Refund(ctx context.Context, key string, a tool.Args, token string) (Entry, error) {
	body := struct {
		Order    string      `json:"order"`
		Amount   money.Cents `json:"amount"`
		Line     string      `json:"line,omitempty"`
		Quantity int64       `json:"quantity,omitempty"`
	}{a.Order, a.Amount, a.Line, a.Quantity}
	return l.write(ctx, request{method: http.MethodPost, path: "/refunds", token: token, key: key, body: body})
}

// Reverse posts a reversal of entry with an idempotency key (none when
// empty) and an actor token bound to reverse_refund {entry}.
func (l *Ledger) Reverse(ctx context.Context, key, entry, token string) (Entry, error) {
	body := struct {
		Entry string `json:"entry"`
	}{entry}
	return l.write(ctx, request{method: http.MethodPost, path: "/reversals", token: token, key: key, body: body})
}

func (l *Ledger) write(ctx context.Context, q request) (Entry, error) {
	var e Entry
	h, err := l.c.exchange(ctx, q, &e)
	if err != nil {
		return Entry{}, err
	}
	e.Replayed = h.Get("Idempotent-Replayed") == "true"
	return e, nil
}

// ByKey returns the entry recorded under an idempotency key; found is false
// when the ledger has none.
func (l *Ledger) ByKey(ctx context.Context, key string) (e Entry, found bool, err error) {
	_, err = l.c.exchange(ctx, request{method: http.MethodGet, path: "/refunds?key=" + url.QueryEscape(key)}, &e)
	if IsNotFound(err) {
		return Entry{}, false, nil
	}
	if err != nil {
		return Entry{}, false, err
	}
	return e, true, nil
}

// Entries returns every ledger entry in id order.
func (l *Ledger) Entries(ctx context.Context) ([]Entry, error) {
	var b struct {
		Entries []Entry `json:"entries"`
	}
	if _, err := l.c.exchange(ctx, request{method: http.MethodGet, path: "/entries"}, &b); err != nil {
		return nil, err
	}
	return b.Entries, nil
}

// Orders is a client of the order system's HTTP API. Each method makes
// exactly one request.
type Orders struct{ c client }

// NewOrders returns a client of the order system at baseURL. A nil hc means
// DefaultHTTPClient.
func NewOrders(baseURL string, hc *http.Client) *Orders {
	return &Orders{c: newClient("orders", baseURL, hc)}
}

// Order reads an order with an actor token bound to lookup_order {order}.
// An unknown order is a *Refused with NotFound true.
func (o *Orders) Order(ctx context.Context, id, token string) (Order, error) {
	var ord Order
	_, err := o.c.exchange(ctx, request{method: http.MethodGet, path: "/orders/" + url.PathEscape(id), token: token}, &ord)
	return ord, err
}

// Reship asks for a shipment of an order under a reference, with an actor
// token bound to reship_order {order} and to the reference. The reference
// is the order system's idempotency key: a repeated request answers the
// shipment the first one made.
func (o *Orders) Reship(ctx context.Context, id, reference, token string) (Shipment, error) {
	var sh Shipment
	body := struct {
		Reference string `json:"reference"`
	}{reference}
	_, err := o.c.exchange(ctx, request{method: http.MethodPost, path: "/orders/" + url.PathEscape(id) + "/shipments", token: token, body: body}, &sh)
	return sh, err
}

// ShipmentsByReference lists the shipments of an order made under a
// reference (no token: a reporting read).
func (o *Orders) ShipmentsByReference(ctx context.Context, id, reference string) ([]Shipment, error) {
	return o.list(ctx, "/orders/"+url.PathEscape(id)+"/shipments?reference="+url.QueryEscape(reference))
}

// Shipments lists an order's shipments (no token: a reporting read).
func (o *Orders) Shipments(ctx context.Context, id string) ([]Shipment, error) {
	return o.list(ctx, "/orders/"+url.PathEscape(id)+"/shipments")
}

// AllShipments lists every shipment of every order.
func (o *Orders) AllShipments(ctx context.Context) ([]Shipment, error) {
	return o.list(ctx, "/shipments")
}

func (o *Orders) list(ctx context.Context, path string) ([]Shipment, error) {
	var b struct {
		Shipments []Shipment `json:"shipments"`
	}
	if _, err := o.c.exchange(ctx, request{method: http.MethodGet, path: path}, &b); err != nil {
		return nil, err
	}
	return b.Shipments, nil
}
