package orders

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/countersign/countersign/executor/sim/actorcheck"
	"github.com/countersign/countersign/executor/sim/fault"
)

var (
	orderID = regexp.MustCompile(`^O-[0-9]{1,12}$`)
	// reference is a reship's reference: printable ASCII without spaces,
	// as an idempotency key is.
	reference = regexp.MustCompile(`^[\x21-\x7e]{1,255}$`)
)

// Order is an order as the order system holds it. Paid is integer cents.
type Order struct {
	ID       string `json:"id"`
	Region   string `json:"region"`
	Customer string `json:"customer"`
	Paid     int64  `json:"paid"`
	Status   string `json:"status"`
}

func (o Order) validate() error {
	switch {
	case !orderID.MatchString(o.ID):
		return fmt.Errorf("%w: id %q must match %s", ErrInvalidOrder, o.ID, orderID)
	case o.Region == "" || o.Customer == "" || o.Status == "":
		return fmt.Errorf("%w: %s needs region, customer and status", ErrInvalidOrder, o.ID)
	case o.Paid <= 0:
		return fmt.Errorf("%w: %s: paid must be positive cents", ErrInvalidOrder, o.ID)
	}
	return nil
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
	bucketOrders    = []byte("orders")    // id -> Order JSON
	bucketShipments = []byte("shipments") // 8-byte big-endian seq -> Shipment JSON
	bucketMeta      = []byte("meta")
	keySeeded       = []byte("seeded")
)

// initialize creates the buckets and, the first time only, seeds orders.
func initialize(tx *bolt.Tx, seed []Order) error {
	for _, b := range [][]byte{bucketOrders, bucketShipments, bucketMeta} {
		if _, err := tx.CreateBucketIfNotExists(b); err != nil {
			return err
		}
	}
	meta := tx.Bucket(bucketMeta)
	if meta.Get(keySeeded) != nil {
		return nil
	}
	for _, o := range seed {
		if err := putOrder(tx, o); err != nil {
			return err
		}
	}
	return meta.Put(keySeeded, []byte("1"))
}

func putOrder(tx *bolt.Tx, o Order) error {
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

// shipped is the outcome of one shipment write.
type shipped struct {
	shipment Shipment
	effects  fault.Effects
}

// ship records a shipment of an existing order. A shipment authorized by a
// token records the token's jti in the same transaction (Core.Act), which
// concurrent requests share; the injected faults apply to those only.
func (s *Server) ship(sh Shipment, token *actorcheck.Claims) (shipped, error) {
	var (
		out     shipped
		missing error
		taken   *fault.Effects // taken once: the function may run again
	)
	fn := func(tx *bolt.Tx) error {
		out = shipped{}
		if _, missing = getOrder(tx, sh.Order); missing != nil {
			if errors.Is(missing, ErrNotFound) {
				return nil // an answer: the jti stays recorded
			}
			return missing
		}
		b := tx.Bucket(bucketShipments)
		seq, err := b.NextSequence()
		if err != nil {
			return err
		}
		sh.ID, sh.At = "S"+strconv.FormatUint(seq, 10), s.core.Clock.Now().UTC()
		if token != nil && taken == nil {
			effects := s.core.Faults.Take(false)
			taken = &effects
		}
		if taken != nil {
			out.effects = *taken
		}
		out.shipment = sh
		if out.effects.LoseWrite {
			s.core.Log.Warn("fault: lose_write", "shipment", sh.ID)
			return nil
		}
		v, err := json.Marshal(sh)
		if err != nil {
			return err
		}
		return b.Put(binary.BigEndian.AppendUint64(nil, seq), v)
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
