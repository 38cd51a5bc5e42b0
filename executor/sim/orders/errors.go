package orders

import "errors"

var (
	// ErrNotFound: no such order.
	ErrNotFound = errors.New("orders: no such order")
	// ErrInvalidOrder: an order record that cannot be stored (bad id,
	// missing field, non-positive paid amount).
	ErrInvalidOrder = errors.New("orders: invalid order")
)
