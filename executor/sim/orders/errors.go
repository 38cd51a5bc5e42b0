package orders

import "errors"

// CodeReferenceMissing: 400, a reship request without a reference. Error
// codes of token refusals are actorcheck's; the others are simhttp's.
const CodeReferenceMissing = "reference_missing"

var (
	// ErrNotFound: no such order.
	ErrNotFound = errors.New("orders: no such order")
	// ErrInvalidOrder: an order record that cannot be stored (bad id,
	// missing field, non-positive paid amount).
	ErrInvalidOrder = errors.New("orders: invalid order")
)
