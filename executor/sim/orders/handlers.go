package orders

import (
	"errors"
	"net/http"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/countersign/countersign/executor/sim/actorcheck"
	"github.com/countersign/countersign/executor/sim/fault"
	"github.com/countersign/countersign/executor/sim/simhttp"
	"github.com/countersign/countersign/executor/strictjson"
)

// HeaderReplayed marks the answer to a reship under a reference already
// shipped: 200 with the first shipment, as the ledger marks a replayed
// idempotency key.
const HeaderReplayed = "Idempotent-Replayed"

func (s *Server) routes() {
	rt := s.core.Router
	rt.Handle(http.MethodGet, "/orders/{id}", s.getOrder)
	rt.Handle(http.MethodPost, "/orders/{id}/shipments", s.postShipment)
	rt.Handle(http.MethodGet, "/orders/{id}/shipments", s.getShipments)
	rt.Handle(http.MethodGet, "/shipments", s.getAllShipments)
	rt.Handle(http.MethodPost, "/orders/{id}/line-refunds", s.postLineRefund)
	rt.Handle(http.MethodPost, "/_sim/orders", s.postOrder)
	rt.Handle(http.MethodPost, "/_sim/external-shipments", s.postExternal)
}

// notFound maps ErrNotFound to a 404 answer.
func notFound(err error) error {
	if errors.Is(err, ErrNotFound) {
		return simhttp.Errorf(http.StatusNotFound, simhttp.CodeNotFound, "%v", err)
	}
	return err
}

// getOrder answers a lookup. A lookup token only reads: its single use is
// held from memory (simserver.Core.Read), and the lookup commits nothing.
func (s *Server) getOrder(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	claims, err := s.core.Verifier.Authenticate(r.Context(), r.Header.Get("Authorization"))
	if err != nil {
		return err
	}
	want := actorcheck.Want{Audience: Audience, Scope: ScopeLookup, Call: actorcheck.OrderCall(actorcheck.ToolLookupOrder, id)}
	if err := claims.Authorize(want); err != nil {
		return s.core.RefuseRead(claims, err)
	}
	var o Order
	err = s.core.Read(claims, func(tx *bolt.Tx) (err error) {
		o, err = getOrder(tx, id)
		return err
	})
	if err != nil {
		return notFound(err)
	}
	simhttp.WriteJSON(w, http.StatusOK, o)
	return nil
}

func (s *Server) postShipment(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	claims, err := s.core.Verifier.Authenticate(r.Context(), r.Header.Get("Authorization"))
	if err != nil {
		return err
	}
	ref, err := decodeReship(w, r)
	if err == nil {
		err = claims.Authorize(actorcheck.Want{Audience: Audience, Scope: ScopeReship, Call: actorcheck.OrderCall(actorcheck.ToolReshipOrder, id), Reference: ref})
	}
	if err != nil {
		return s.core.Refuse(claims, err)
	}
	out, err := s.ship(Shipment{Kind: KindReship, Order: id, Reference: ref, By: claims.Subject, Agent: claims.Agent}, &claims)
	switch {
	case err != nil:
		return notFound(err)
	case out.refusal != nil:
		return out.refusal
	case out.effects.LoseResponse:
		s.core.Log.Warn("fault: lose_response", "shipment", out.shipment.ID, "replay", out.replayed)
		return fault.DropResponse(w)
	case out.replayed:
		w.Header().Set(HeaderReplayed, "true")
		simhttp.WriteJSON(w, http.StatusOK, out.shipment)
		return nil
	}
	simhttp.WriteJSON(w, http.StatusCreated, out.shipment)
	return nil
}

// decodeReship reads the body of a reship, exactly {"reference": R}; the
// order is in the path. Without a reference the caller could never tell
// its shipment from another's, so it is refused.
func decodeReship(w http.ResponseWriter, r *http.Request) (string, error) {
	f, err := simhttp.ReadObject(w, r, true)
	if err != nil {
		return "", err
	}
	if _, ok := f["reference"]; !ok {
		return "", simhttp.Errorf(http.StatusBadRequest, CodeReferenceMissing, `send {"reference": R}, the reference the actor token was minted for`)
	}
	ref, err := f.String("reference", reference)
	if err != nil {
		return "", err
	}
	return ref, f.Done()
}

func (s *Server) getShipments(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	if len(q["reference"]) > 1 || (q.Has("reference") && !reference.MatchString(q.Get("reference"))) {
		return simhttp.Errorf(http.StatusUnprocessableEntity, simhttp.CodeInvalidField, "ask for at most one reference of 1 to 255 printable characters")
	}
	all, err := s.ShipmentsByReference(r.PathValue("id"), q.Get("reference"))
	if err != nil {
		return notFound(err)
	}
	simhttp.WriteJSON(w, http.StatusOK, map[string]any{"shipments": all})
	return nil
}

func (s *Server) getAllShipments(w http.ResponseWriter, _ *http.Request) error {
	all, err := s.AllShipments()
	if err != nil {
		return err
	}
	simhttp.WriteJSON(w, http.StatusOK, map[string]any{"shipments": all})
	return nil
}

func (s *Server) postOrder(w http.ResponseWriter, r *http.Request) error {
	f, err := simhttp.ReadObject(w, r, false)
	if err != nil {
		return err
	}
	var o Order
	if o.ID, err = f.String("id", orderID); err != nil {
		return err
	}
	for _, c := range []struct {
		name string
		dst  *string
	}{{"region", &o.Region}, {"customer", &o.Customer}, {"status", &o.Status}} {
		if *c.dst, err = f.String(c.name, nil); err != nil {
			return err
		}
	}
	if o.Paid, err = f.Cents("paid"); err != nil {
		return err
	}
	o.Currency = DefaultCurrency
	if raw, ok, err := f.Raw("currency"); err != nil {
		return err
	} else if ok {
		if err := strictjson.Decode(raw, &o.Currency); err != nil || !currency.MatchString(o.Currency) {
			return simhttp.Errorf(http.StatusUnprocessableEntity, simhttp.CodeInvalidField, "currency must be an ISO 4217 code such as \"USD\"")
		}
	}
	for _, d := range []struct {
		name string
		dst  *time.Time
	}{{"placed_at", &o.PlacedAt}, {"shipped_at", &o.ShippedAt}} {
		if raw, ok, err := f.Raw(d.name); err != nil {
			return err
		} else if ok {
			var at string
			if err := strictjson.Decode(raw, &at); err != nil {
				return simhttp.Errorf(http.StatusUnprocessableEntity, simhttp.CodeInvalidField, "%s must be an RFC 3339 time such as \"2026-11-20T09:30:00Z\"", d.name)
			}
			if *d.dst, err = time.Parse(time.RFC3339Nano, at); err != nil {
				return simhttp.Errorf(http.StatusUnprocessableEntity, simhttp.CodeInvalidField, "%s must be an RFC 3339 time such as \"2026-11-20T09:30:00Z\"", d.name)
			}
		}
	}
	if raw, ok, err := f.Raw("lines"); err != nil {
		return err
	} else if ok {
		if err := strictjson.Decode(raw, &o.Lines); err != nil {
			return simhttp.Errorf(http.StatusUnprocessableEntity, simhttp.CodeInvalidField, "lines must be an array of {id, sku, description, unit_amount, quantity, refunded_quantity}: %v", err)
		}
	}
	if err := f.Done(); err != nil {
		return err
	}
	o = o.dated(s.core.Clock.Now()) // answered as stored
	created, err := s.PutOrder(o)
	if errors.Is(err, ErrInvalidOrder) {
		return simhttp.Errorf(http.StatusUnprocessableEntity, simhttp.CodeInvalidField, "%v", err)
	}
	if err != nil {
		return err
	}
	if o.Lines == nil {
		o.Lines = []Line{}
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	simhttp.WriteJSON(w, status, o)
	return nil
}

func (s *Server) postExternal(w http.ResponseWriter, r *http.Request) error {
	f, err := simhttp.ReadObject(w, r, false)
	if err != nil {
		return err
	}
	order, err := f.String("order", orderID)
	if err != nil {
		return err
	}
	by, err := f.String("by", nil)
	if err != nil {
		return err
	}
	if err := f.Done(); err != nil {
		return err
	}
	sh, err := s.AddExternalShipment(order, by)
	if err != nil {
		return notFound(err)
	}
	simhttp.WriteJSON(w, http.StatusCreated, sh)
	return nil
}

// postLineRefund is the ledger booking a line-item refund before it makes
// the entry: {"line","quantity","amount","key"}, the key being the
// ledger's Idempotency-Key. It carries no actor token: the ledger has
// already checked the agent's token, and this call is between the two
// systems of record, as the reporting reads are. 200 {"booked": true,
// "replayed": bool, "order": <the order after the booking>}, or 409 with
// a CodeLine* code (or idempotency_key_reused), 404 for an unknown order.
func (s *Server) postLineRefund(w http.ResponseWriter, r *http.Request) error {
	f, err := simhttp.ReadObject(w, r, false)
	if err != nil {
		return err
	}
	b := LineRefund{Order: r.PathValue("id")}
	if !orderID.MatchString(b.Order) {
		return simhttp.Errorf(http.StatusNotFound, simhttp.CodeNotFound, "no order %q", b.Order)
	}
	if b.Line, err = f.String("line", lineID); err != nil {
		return err
	}
	if b.Quantity, err = f.Cents("quantity"); err != nil {
		return err
	}
	if b.Amount, err = f.Cents("amount"); err != nil {
		return err
	}
	if b.Key, err = f.String("key", reference); err != nil {
		return err
	}
	if err := f.Done(); err != nil {
		return err
	}
	replayed, err := s.BookLineRefund(b)
	var refused *RefusedLine
	if errors.As(err, &refused) {
		return simhttp.Errorf(http.StatusConflict, refused.Code, "%s", refused.Message)
	}
	if err != nil {
		return notFound(err)
	}
	o, err := s.Order(b.Order)
	if err != nil {
		return err
	}
	simhttp.WriteJSON(w, http.StatusOK, lineRefundAnswer{Booked: true, Replayed: replayed, Order: o})
	return nil
}

// lineRefundAnswer is the answer to a booked line-item refund.
type lineRefundAnswer struct {
	Booked   bool  `json:"booked"`
	Replayed bool  `json:"replayed"`
	Order    Order `json:"order"`
}
