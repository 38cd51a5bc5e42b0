package orders

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/countersign/countersign/executor/sim/actorcheck"
	"github.com/countersign/countersign/executor/sim/fault"
	"github.com/countersign/countersign/executor/sim/simhttp"
)

var (
	orderID = regexp.MustCompile(`^O-[0-9]{1,12}$`)
	// reference is a reship's reference: printable ASCII without spaces,
	// as an idempotency key is.
	reference = regexp.MustCompile(`^[\x21-\x7e]{1,255}$`)
)

// Order is an order as the order system holds it. Paid is integer cents.
// Lines, when the order has any, add up to Paid; it is answered as [] when
// it has none.
type Order struct {
	ID       string `json:"id"`
	Region   string `json:"region"`
	Customer string `json:"customer"`
	Paid     int64  `json:"paid"`
	Status   string `json:"status"`
	// Currency is the ISO 4217 code of every amount of the order, paid
	// and the lines' unit amounts, all in its minor unit (cents).
	Currency string `json:"currency"`
	Lines    []Line `json:"lines"`
	// PlacedAt is when the order was placed: an order added without it
	// was placed when it was added (by the order system's clock). An
	// order added as shipped without a ShippedAt shipped when it was
	// placed; one not shipped has none. Both are answered in RFC 3339,
	// and an order stored before orders were dated is answered without.
	PlacedAt  time.Time `json:"placed_at,omitzero"`
	ShippedAt time.Time `json:"shipped_at,omitzero"`
}

// StatusShipped is the status of an order that has shipped.
const StatusShipped = "shipped"

// dated is o with the dates it was added without, at now, and every date
// in UTC.
func (o Order) dated(now time.Time) Order {
	o.PlacedAt, o.ShippedAt = o.PlacedAt.UTC(), o.ShippedAt.UTC()
	if o.PlacedAt.IsZero() {
		o.PlacedAt = now.UTC()
	}
	if o.ShippedAt.IsZero() && o.Status == StatusShipped {
		o.ShippedAt = o.PlacedAt
	}
	return o
}

// DefaultCurrency is the currency of an order added without one: the
// Quillfeather fixture's amounts are all in US dollars.
const DefaultCurrency = "USD"

// currency is what an order's currency may be: an ISO 4217 code.
var currency = regexp.MustCompile(`^[A-Z]{3}$`)

// Line is one line of an order. RefundedQuantity counts the units the
// ledger booked as refunded (see BookLineRefund).
type Line struct {
	ID               string `json:"id"`
	SKU              string `json:"sku"`
	Description      string `json:"description"`
	UnitAmount       int64  `json:"unit_amount"`
	Quantity         int64  `json:"quantity"`
	RefundedQuantity int64  `json:"refunded_quantity"`
}

// lineID is what a line id may be.
var lineID = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

func (o Order) validate() error {
	switch {
	case !orderID.MatchString(o.ID):
		return fmt.Errorf("%w: id %q must match %s", ErrInvalidOrder, o.ID, orderID)
	case o.Region == "" || o.Customer == "" || o.Status == "":
		return fmt.Errorf("%w: %s needs region, customer and status", ErrInvalidOrder, o.ID)
	case o.Paid <= 0:
		return fmt.Errorf("%w: %s: paid must be positive cents", ErrInvalidOrder, o.ID)
	case !o.ShippedAt.IsZero() && o.ShippedAt.Before(o.PlacedAt):
		return fmt.Errorf("%w: %s: shipped_at %s is before placed_at %s", ErrInvalidOrder, o.ID,
			o.ShippedAt.Format(time.RFC3339), o.PlacedAt.Format(time.RFC3339))
	}
	var total int64
	seen := map[string]bool{}
	for _, l := range o.Lines {
		switch {
		case !lineID.MatchString(l.ID) || seen[l.ID]:
			return fmt.Errorf("%w: %s: line id %q must be unique and match %s", ErrInvalidOrder, o.ID, l.ID, lineID)
		case l.SKU == "" || l.Description == "":
			return fmt.Errorf("%w: %s line %s needs a sku and a description", ErrInvalidOrder, o.ID, l.ID)
		case l.UnitAmount <= 0 || l.Quantity <= 0 || l.UnitAmount > o.Paid || l.Quantity > o.Paid:
			return fmt.Errorf("%w: %s line %s: unit_amount and quantity must be positive and within what was paid", ErrInvalidOrder, o.ID, l.ID)
		case l.RefundedQuantity < 0 || l.RefundedQuantity > l.Quantity:
			return fmt.Errorf("%w: %s line %s: refunded_quantity must be 0 to quantity", ErrInvalidOrder, o.ID, l.ID)
		}
		seen[l.ID] = true
		total += l.UnitAmount * l.Quantity
	}
	if len(o.Lines) > 0 && total != o.Paid {
		return fmt.Errorf("%w: %s: the lines add up to %d cents, not the %d paid", ErrInvalidOrder, o.ID, total, o.Paid)
	}
	return nil
}

// line returns the line with id, if the order has one.
func (o Order) line(id string) (*Line, bool) {
	for i := range o.Lines {
		if o.Lines[i].ID == id {
			return &o.Lines[i], true
		}
	}
	return nil, false
}

// ShipmentKind says who made a shipment.
type ShipmentKind string

// Shipment kinds.
const (
	KindReship   ShipmentKind = "reship"   // through the sidecar, with an actor token
	KindExternal ShipmentKind = "external" // made outside the sidecar
)

// Shipment is one shipment of an order, numbered S1, S2 ... A reshipment
// carries the reference its request named, by which the caller finds it
// again when the answer was lost.
type Shipment struct {
	ID        string       `json:"id"`
	Kind      ShipmentKind `json:"kind"`
	Order     string       `json:"order"`
	Reference string       `json:"reference,omitempty"`
	By        string       `json:"by"`
	Agent     string       `json:"agent,omitempty"`
	At        time.Time    `json:"at"`
}

var (
	bucketOrders      = []byte("orders")       // id -> Order JSON
	bucketShipments   = []byte("shipments")    // 8-byte big-endian seq -> Shipment JSON
	bucketReferences  = []byte("references")   // reship reference -> 8-byte seq of its first shipment
	bucketLineRefunds = []byte("line_refunds") // ledger idempotency key -> LineRefund JSON
	bucketMeta        = []byte("meta")
	keySeeded         = []byte("seeded")
)

// initialize creates the buckets and, the first time only, seeds orders.
// A file written before references were keys gets its reference index
// built from its shipments, once (the first shipment of a reference is
// the one a repeated request answers).
func initialize(tx *bolt.Tx, seed []Order, now time.Time) error {
	unindexed := tx.Bucket(bucketReferences) == nil && tx.Bucket(bucketShipments) != nil
	for _, b := range [][]byte{bucketOrders, bucketShipments, bucketReferences, bucketLineRefunds, bucketMeta} {
		if _, err := tx.CreateBucketIfNotExists(b); err != nil {
			return err
		}
	}
	if unindexed {
		if err := indexReferences(tx); err != nil {
			return err
		}
	}
	meta := tx.Bucket(bucketMeta)
	if meta.Get(keySeeded) != nil {
		return nil
	}
	for _, o := range seed {
		if err := putOrder(tx, o.dated(now)); err != nil {
			return err
		}
	}
	return meta.Put(keySeeded, []byte("1"))
}

func putOrder(tx *bolt.Tx, o Order) error {
	if o.Currency == "" {
		o.Currency = DefaultCurrency
	}
	v, err := json.Marshal(o)
	if err != nil {
		return err
	}
	return tx.Bucket(bucketOrders).Put([]byte(o.ID), v)
}

func getOrder(tx *bolt.Tx, id string) (Order, error) {
	v := tx.Bucket(bucketOrders).Get([]byte(id))
	if v == nil {
		return Order{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	var o Order
	if err := json.Unmarshal(v, &o); err != nil {
		return Order{}, fmt.Errorf("order %s: %w", id, err)
	}
	if o.Lines == nil {
		o.Lines = []Line{}
	}
	if o.Currency == "" { // stored before orders had a currency
		o.Currency = DefaultCurrency
	}
	return o, nil
}

// Order returns one order, or ErrNotFound.
func (s *Server) Order(id string) (Order, error) {
	var o Order
	err := s.core.DB.View(func(tx *bolt.Tx) error {
		var err error
		o, err = getOrder(tx, id)
		return err
	})
	return o, err
}

// PutOrder adds or replaces an order; created says which.
func (s *Server) PutOrder(o Order) (created bool, err error) {
	o = o.dated(s.core.Clock.Now())
	if err := o.validate(); err != nil {
		return false, err
	}
	err = s.core.DB.Update(func(tx *bolt.Tx) error {
		created = tx.Bucket(bucketOrders).Get([]byte(o.ID)) == nil
		return putOrder(tx, o)
	})
	if err != nil {
		return false, fmt.Errorf("orders: put %s: %w", o.ID, err)
	}
	return created, nil
}

// indexReferences indexes every reshipment of the file by its reference.
func indexReferences(tx *bolt.Tx) error {
	refs := tx.Bucket(bucketReferences)
	return tx.Bucket(bucketShipments).ForEach(func(k, v []byte) error {
		var sh Shipment
		if err := json.Unmarshal(v, &sh); err != nil {
			return err
		}
		if sh.Reference == "" || refs.Get([]byte(sh.Reference)) != nil {
			return nil
		}
		return refs.Put([]byte(sh.Reference), k)
	})
}

// shipped is the outcome of one shipment write: the shipment made, or the
// one a repeated reference names (replayed), or a refusal.
type shipped struct {
	shipment Shipment
	replayed bool
	refusal  error
	effects  fault.Effects
}

// ship records a shipment of an existing order. A shipment authorized by a
// token records the token's jti in the same transaction (Core.Act), which
// concurrent requests share; the injected faults apply to those only.
//
// A reshipment's reference is its idempotency key: a request under a
// reference already shipped makes no shipment and answers the first one
// (replayed), as the ledger answers a repeated key; under a reference
// shipped for another order it is refused (409 reference_reused). So a
// request that lands late, after its caller gave up on it and asked
// again, ships nothing twice. Options.NoReferenceKey turns that off.
func (s *Server) ship(sh Shipment, token *actorcheck.Claims) (shipped, error) {
	var (
		out     shipped
		missing error
		taken   *fault.Effects // taken once: the function may run again
	)
	take := func(replay bool) fault.Effects {
		switch {
		case token == nil:
			return fault.Effects{} // no faults outside requests
		case taken == nil && replay:
			effects := s.core.Faults.TakeReplay()
			taken = &effects
		case taken == nil:
			effects := s.core.Faults.Take(false)
			taken = &effects
		}
		return *taken
	}
	fn := func(tx *bolt.Tx) error {
		out = shipped{}
		if _, missing = getOrder(tx, sh.Order); missing != nil {
			if errors.Is(missing, ErrNotFound) {
				return nil // an answer: the jti stays recorded
			}
			return missing
		}
		b, refs := tx.Bucket(bucketShipments), tx.Bucket(bucketReferences)
		if seq := refs.Get([]byte(sh.Reference)); sh.Reference != "" && seq != nil && !s.noReferenceKey {
			return s.replay(tx, sh, seq, &out, take)
		}
		seq, err := b.NextSequence()
		if err != nil {
			return err
		}
		sh.ID, sh.At = "S"+strconv.FormatUint(seq, 10), s.core.Clock.Now().UTC()
		out.shipment, out.effects = sh, take(false)
		if out.effects.LoseWrite {
			s.core.Log.Warn("fault: lose_write", "shipment", sh.ID)
			return nil
		}
		v, err := json.Marshal(sh)
		if err != nil {
			return err
		}
		key := binary.BigEndian.AppendUint64(nil, seq)
		if sh.Reference != "" && refs.Get([]byte(sh.Reference)) == nil {
			if err := refs.Put([]byte(sh.Reference), key); err != nil {
				return err
			}
		}
		return b.Put(key, v)
	}
	var err error
	if token != nil {
		err = s.core.Act(*token, fn)
	} else {
		err = s.core.Update(fn)
	}
	if err == nil {
		err = missing
	}
	return out, err
}

// replay answers a request under a reference already shipped: the first
// shipment, or a refusal when that was another order's.
func (s *Server) replay(tx *bolt.Tx, sh Shipment, seq []byte, out *shipped, take func(replay bool) fault.Effects) error {
	v := tx.Bucket(bucketShipments).Get(seq)
	if v == nil {
		return fmt.Errorf("reference %q names a missing shipment", sh.Reference)
	}
	var first Shipment
	if err := json.Unmarshal(v, &first); err != nil {
		return err
	}
	if first.Order != sh.Order {
		out.refusal = simhttp.Errorf(http.StatusConflict, CodeReferenceReused,
			"reference %q already shipped order %s (%s); use a new reference for a new reshipment", sh.Reference, first.Order, first.ID)
		return nil
	}
	out.shipment, out.replayed, out.effects = first, true, take(true)
	return nil
}

// AddExternalShipment records a shipment made outside the sidecar: no
// token, no injected faults.
func (s *Server) AddExternalShipment(order, by string) (Shipment, error) {
	if by == "" {
		return Shipment{}, fmt.Errorf("orders: an external shipment needs by")
	}
	out, err := s.ship(Shipment{Kind: KindExternal, Order: order, By: by}, nil)
	return out.shipment, err
}

// Shipments returns the shipments of one order in id order (ErrNotFound for
// an unknown order).
func (s *Server) Shipments(order string) ([]Shipment, error) {
	return s.shipments(order, "")
}

// ShipmentsByReference returns the shipments of one order that carry ref,
// in id order (ErrNotFound for an unknown order).
func (s *Server) ShipmentsByReference(order, ref string) ([]Shipment, error) {
	return s.shipments(order, ref)
}

// AllShipments returns every shipment in id order.
func (s *Server) AllShipments() ([]Shipment, error) {
	return s.shipments("", "")
}

// shipments lists the shipments of order ("" every order) that carry ref
// ("" whatever they carry).
func (s *Server) shipments(order, ref string) ([]Shipment, error) {
	all := []Shipment{}
	err := s.core.DB.View(func(tx *bolt.Tx) error {
		if order != "" {
			if _, err := getOrder(tx, order); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketShipments).ForEach(func(_, v []byte) error {
			var sh Shipment
			if err := json.Unmarshal(v, &sh); err != nil {
				return err
			}
			if (order == "" || sh.Order == order) && (ref == "" || sh.Reference == ref) {
				all = append(all, sh)
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return all, nil
}

// LineRefund is the ledger's booking of a line-item refund: Quantity units
// of Line on Order for Amount cents, under the ledger's idempotency Key.
type LineRefund struct {
	Order    string `json:"order"`
	Line     string `json:"line"`
	Quantity int64  `json:"quantity"`
	Amount   int64  `json:"amount"`
	Key      string `json:"key"`
}

// BookLineRefund checks a line-item refund against the order's line and
// counts its units as refunded, in one write transaction, so two bookings
// cannot both take the last unit. The amount must be the line's unit
// amount times the quantity, and the quantity at most what is left. A key
// booked before answers again (replayed true) if the booking is the same,
// and is refused if it is not: the ledger retries with its key, and a
// retry must not count the units twice. The refusals are *RefusedLine.
func (s *Server) BookLineRefund(b LineRefund) (replayed bool, err error) {
	err = s.core.Update(func(tx *bolt.Tx) error {
		replayed = false
		books := tx.Bucket(bucketLineRefunds)
		if v := books.Get([]byte(b.Key)); v != nil {
			var was LineRefund
			if err := json.Unmarshal(v, &was); err != nil {
				return fmt.Errorf("line refund %q: %w", b.Key, err)
			}
			if was != b {
				return &RefusedLine{Code: CodeKeyReused, Message: fmt.Sprintf("key %q booked %d of line %s on %s; use a new key for another refund", b.Key, was.Quantity, was.Line, was.Order)}
			}
			replayed = true
			return nil
		}
		o, err := getOrder(tx, b.Order)
		if err != nil {
			return err
		}
		l, ok := o.line(b.Line)
		switch {
		case !ok:
			return &RefusedLine{Code: CodeLineNotFound, Message: fmt.Sprintf("order %s has no line %q; lookup_order lists its lines", b.Order, b.Line)}
		case b.Quantity <= 0 || b.Quantity > l.Quantity-l.RefundedQuantity:
			return &RefusedLine{Code: CodeLineNotRefundable, Message: fmt.Sprintf("line %s of %s has %d of %d units left to refund, not %d", l.ID, b.Order, l.Quantity-l.RefundedQuantity, l.Quantity, b.Quantity)}
		case b.Amount != l.UnitAmount*b.Quantity:
			return &RefusedLine{Code: CodeLineAmountMismatch, Message: fmt.Sprintf("%d units of line %s of %s cost %d cents, not %d", b.Quantity, l.ID, b.Order, l.UnitAmount*b.Quantity, b.Amount)}
		}
		l.RefundedQuantity += b.Quantity
		if err := putOrder(tx, o); err != nil {
			return err
		}
		v, err := json.Marshal(b)
		if err != nil {
			return err
		}
		return books.Put([]byte(b.Key), v)
	})
	return replayed, err
}
