package orders

import "errors"

// Error codes of the order system beyond those of actorcheck (token
// refusals) and simhttp.
const (
	// CodeReferenceMissing: 400, a reship request without a reference.
	CodeReferenceMissing = "reference_missing"
	// CodeReferenceReused: 409, a reship under a reference that already
	// shipped another order.
	CodeReferenceReused = "reference_reused"
	// CodeLineNotFound: 409, a line-item refund of a line the order does
	// not have.
	CodeLineNotFound = "line_not_found"
	// CodeLineNotRefundable: 409, a line-item refund of more units than
	// are left to refund on the line.
	CodeLineNotRefundable = "line_not_refundable"
	// CodeLineAmountMismatch: 409, a line-item refund whose amount is not
	// the line's unit amount times the quantity.
	CodeLineAmountMismatch = "line_amount_mismatch"
	// CodeKeyReused: 409, a booking key already booked another refund.
	CodeKeyReused = "idempotency_key_reused"
)

// RefusedLine is the order system refusing a line-item refund booking;
// Code is one of the CodeLine* codes or CodeKeyReused. Answered 409.
type RefusedLine struct {
	Code    string
	Message string
}

func (e *RefusedLine) Error() string {
	return "orders: line refund refused: " + e.Code + ": " + e.Message
}

var (
	// ErrNotFound: no such order.
	ErrNotFound = errors.New("orders: no such order")
	// ErrInvalidOrder: an order record that cannot be stored (bad id,
	// missing field, non-positive paid amount).
	ErrInvalidOrder = errors.New("orders: invalid order")
)
