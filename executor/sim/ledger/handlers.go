package ledger

import (
	"context"
	"errors"
	"net/http"
	"regexp"
	"strconv"

	"github.com/countersign/countersign/executor/sim/actorcheck"
	"github.com/countersign/countersign/executor/sim/fault"
	"github.com/countersign/countersign/executor/sim/simhttp"
)

var (
	orderID = regexp.MustCompile(`^O-[0-9]{1,12}$`)
	lineID  = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)
	entryID = regexp.MustCompile(`^L[1-9][0-9]{0,18}$`)
)

// Header names of the idempotency protocol.
const (
	HeaderIdempotencyKey = "Idempotency-Key"
	HeaderReplayed       = "Idempotent-Replayed"
)

// MaxKeyBytes bounds an Idempotency-Key, as Stripe does.
const MaxKeyBytes = 255

func (s *Server) routes() {
	rt := s.core.Router
	rt.Handle(http.MethodPost, "/refunds", s.postRefund)
	rt.Handle(http.MethodGet, "/refunds", s.getRefund)
	rt.Handle(http.MethodGet, "/entries", s.getEntries)
	rt.Handle(http.MethodPost, "/reversals", s.postReversal)
	rt.Handle(http.MethodPost, "/_sim/external-entries", s.postExternal)
}

// refundRequest is a decoded POST /refunds. Line and Quantity are set for
// a line-item refund only.
type refundRequest struct {
	Order    string
	Amount   int64
	Line     string
	Quantity int64
	Key      string
}

// call is the binding a token for this refund must carry.
func (q refundRequest) call() string {
	if q.Line != "" {
		return actorcheck.LineRefundCall(q.Order, q.Line, q.Quantity, q.Amount)
	}
	return actorcheck.RefundCall(q.Order, q.Amount)
}

// fingerprint is what the idempotency key binds: the operation and its
// canonical parameters.
func (q refundRequest) fingerprint() string {
	fp := "refund " + q.Order + " " + strconv.FormatInt(q.Amount, 10)
	if q.Line != "" {
		fp += " line " + q.Line + " " + strconv.FormatInt(q.Quantity, 10)
	}
	return fp
}

// decodeRefund reads a refund request strictly: the body must be exactly
// {"order": "O-<digits>", "amount": <positive integer cents>}, with
// "line" and "quantity" for a line-item refund (both or neither), and
// exactly one Idempotency-Key header must be present. Without a key a
// captured request could be posted again as a new refund; with one, it
// replays.
func decodeRefund(body []byte, keys []string) (refundRequest, error) {
	var q refundRequest
	key, err := idempotencyKey(keys)
	if err != nil {
		return q, err
	}
	f, err := simhttp.Object(body, false)
	if err != nil {
		return q, err
	}
	if q.Order, err = f.String("order", orderID); err != nil {
		return q, err
	}
	if q.Amount, err = f.Cents("amount"); err != nil {
		return q, err
	}
	if _, ok := f["line"]; ok {
		if q.Line, err = f.String("line", lineID); err != nil {
			return q, err
		}
		if q.Quantity, err = f.Cents("quantity"); err != nil {
			return q, err
		}
	}
	if err := f.Done(); err != nil {
		return q, err
	}
	if key == "" {
		return q, simhttp.Errorf(http.StatusBadRequest, CodeKeyMissing, "send the refund's Idempotency-Key header, the key its actor token was minted for")
	}
	q.Key = key
	return q, nil
}

// idempotencyKey accepts no key or one key of 1 to 255 printable ASCII
// characters.
func idempotencyKey(values []string) (string, error) {
	switch len(values) {
	case 0:
		return "", nil
	case 1:
	default:
		return "", simhttp.Errorf(http.StatusBadRequest, simhttp.CodeInvalidKey, "send at most one Idempotency-Key header")
	}
	k := values[0]
	if k == "" || len(k) > MaxKeyBytes {
		return "", simhttp.Errorf(http.StatusBadRequest, simhttp.CodeInvalidKey, "Idempotency-Key must be 1 to %d characters", MaxKeyBytes)
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x20 || k[i] > 0x7e {
			return "", simhttp.Errorf(http.StatusBadRequest, simhttp.CodeInvalidKey, "Idempotency-Key must be printable ASCII")
		}
	}
	return k, nil
}

// postRefund records a refund. The token's jti is recorded in the
// transaction that makes the entry (simserver.Core.Act), or alone when the
// request is refused (Core.Refuse).
func (s *Server) postRefund(w http.ResponseWriter, r *http.Request) error {
	claims, err := s.core.Verifier.Authenticate(r.Context(), r.Header.Get("Authorization"))
	if err != nil {
		return err
	}
	q, err := s.refundRequest(w, r, claims)
	if err == nil && q.Line != "" {
		err = s.bookLine(r.Context(), q)
	}
	if err != nil {
		return s.core.Refuse(claims, err)
	}
	out, err := s.commit(write{
		entry: Entry{Kind: KindRefund, Order: q.Order, Amount: q.Amount, Line: q.Line, Quantity: q.Quantity,
			Key: q.Key, By: claims.Subject, Agent: claims.Agent},
		key:         q.Key,
		fingerprint: q.fingerprint(),
		token:       &claims,
	})
	if err != nil {
		return err
	}
	return s.answer(w, out)
}

// refundRequest reads a refund request and checks that claims cover it.
func (s *Server) refundRequest(w http.ResponseWriter, r *http.Request, claims actorcheck.Claims) (refundRequest, error) {
	body, err := simhttp.ReadBody(w, r)
	if err != nil {
		return refundRequest{}, err
	}
	q, err := decodeRefund(body, r.Header.Values(HeaderIdempotencyKey))
	if err != nil {
		return q, err
	}
	return q, claims.Authorize(actorcheck.Want{Audience: Audience, Scope: ScopeRefund, Call: q.call(), Key: q.Key, Amount: q.Amount,
		Line: q.Line, Quantity: q.Quantity})
}

// bookLine has the order system check a line-item refund against the
// order's line and count its units, unless q's key already made an entry
// (a retry: the entry is answered again, or the key's reuse refused, by
// commit, and the units were counted the first time).
func (s *Server) bookLine(ctx context.Context, q refundRequest) error {
	if s.lines == nil {
		return simhttp.Errorf(http.StatusServiceUnavailable, CodeLineCheckUnavailable, "this ledger has no order system to check lines against; refund by amount, or start it with the order system's URL")
	}
	if _, err := s.ByKey(q.Key); err == nil {
		return nil
	}
	return s.lines.book(ctx, q)
}

// reversalRequest is a decoded POST /reversals.
type reversalRequest struct {
	Entry string
	Key   string
}

func decodeReversal(body []byte, keys []string) (reversalRequest, error) {
	var q reversalRequest
	key, err := idempotencyKey(keys)
	if err != nil {
		return q, err
	}
	f, err := simhttp.Object(body, false)
	if err != nil {
		return q, err
	}
	if q.Entry, err = f.String("entry", entryID); err != nil {
		return q, err
	}
	q.Key = key
	return q, f.Done()
}

func (s *Server) postReversal(w http.ResponseWriter, r *http.Request) error {
	claims, err := s.core.Verifier.Authenticate(r.Context(), r.Header.Get("Authorization"))
	if err != nil {
		return err
	}
	q, err := s.reversalRequest(w, r, claims)
	if err != nil {
		return s.core.Refuse(claims, err)
	}
	// The order and amount are the reversed entry's; commit fills them in
	// under the same transaction that checks it.
	out, err := s.commit(write{
		entry:       Entry{Kind: KindReversal, Reverses: q.Entry, Key: q.Key, By: claims.Subject, Agent: claims.Agent},
		key:         q.Key,
		fingerprint: "reversal " + q.Entry,
		token:       &claims,
	})
	if err != nil {
		return err
	}
	return s.answer(w, out)
}

// reversalRequest reads a reversal request and checks that claims cover it.
func (s *Server) reversalRequest(w http.ResponseWriter, r *http.Request, claims actorcheck.Claims) (reversalRequest, error) {
	body, err := simhttp.ReadBody(w, r)
	if err != nil {
		return reversalRequest{}, err
	}
	q, err := decodeReversal(body, r.Header.Values(HeaderIdempotencyKey))
	if err != nil {
		return q, err
	}
	return q, claims.Authorize(actorcheck.Want{Audience: Audience, Scope: ScopeReverse, Call: actorcheck.ReversalCall(q.Entry), Key: q.Key})
}

// answer writes the outcome of a write: nothing at all under the
// lose-response fault, else 200 for a replay and 201 for a new entry.
func (s *Server) answer(w http.ResponseWriter, out outcome) error {
	switch {
	case out.effects.LoseResponse:
		s.core.Log.Warn("fault: lose_response", "entry", out.entry.ID, "replay", out.replayed)
		return fault.DropResponse(w)
	case out.replayed:
		w.Header().Set(HeaderReplayed, "true")
		simhttp.WriteJSON(w, http.StatusOK, out.entry)
		return nil
	default:
		simhttp.WriteJSON(w, http.StatusCreated, out.entry)
		return nil
	}
}

func (s *Server) getRefund(w http.ResponseWriter, r *http.Request) error {
	key, err := idempotencyKey(r.URL.Query()["key"])
	if err != nil || key == "" {
		return simhttp.Errorf(http.StatusBadRequest, simhttp.CodeInvalidKey, "ask for one entry with ?key=<Idempotency-Key>")
	}
	e, err := s.ByKey(key)
	if errors.Is(err, ErrNotFound) {
		return simhttp.Errorf(http.StatusNotFound, simhttp.CodeNotFound, "no entry under key %q", key)
	}
	if err != nil {
		return err
	}
	simhttp.WriteJSON(w, http.StatusOK, e)
	return nil
}

func (s *Server) getEntries(w http.ResponseWriter, _ *http.Request) error {
	all, err := s.Entries()
	if err != nil {
		return err
	}
	simhttp.WriteJSON(w, http.StatusOK, map[string]any{"entries": all})
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
	amount, err := f.Cents("amount")
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
	e, err := s.AddExternal(order, amount, by)
	if err != nil {
		return err
	}
	simhttp.WriteJSON(w, http.StatusCreated, e)
	return nil
}
