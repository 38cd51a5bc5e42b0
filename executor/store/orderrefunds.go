package store

import (
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/tool"
)

// bOrderRefunds lists, per order, the refund steps in any workflow that
// count as spent (status started, unknown or done): the entries whose
// amounts bOrderSpent sums, so that a lead reviewing a request sees the
// refunds already on its order without a scan of every step. Key: the
// order id, NUL, the workflow id, NUL, n as 4 big-endian bytes (an order's
// refunds are contiguous); value: an OrderRefund, JSON.
var bOrderRefunds = []byte("refunds_by_order")

// metaOrderRefundsBuilt marks a store whose bOrderRefunds holds every
// spent refund: set once buildOrderRefunds has indexed a store written
// before the index existed (or found it empty).
var metaOrderRefundsBuilt = []byte("refunds_by_order_built")

// OrderRefund is one refund on an order that counts as spent: what it
// was, for which rep (their id in its canonical form, as the rep's
// spending is kept), and since when it has been reserved.
type OrderRefund struct {
	Workflow   string      `json:"workflow"`
	N          int         `json:"n"`
	User       string      `json:"user"`
	Amount     money.Cents `json:"amount"`
	ReservedAt time.Time   `json:"reserved_at"`
}

func orderRefundKey(order, wf string, n int) []byte {
	k := make([]byte, 0, len(order)+len(wf)+6)
	k = append(append(k, order...), 0)
	k = append(append(k, wf...), 0)
	return binary.BigEndian.AppendUint32(k, uint32(n))
}

// listOrderRefund and unlistOrderRefund follow spend and unspend: one
// write each, in the transaction that moves the step.
func (t *Tx) listOrderRefund(s Step, user string) error {
	return t.putJSON(bOrderRefunds, orderRefundKey(s.Args.Order, s.Workflow, s.N),
		OrderRefund{Workflow: s.Workflow, N: s.N, User: user, Amount: s.Args.Amount, ReservedAt: s.ReservedAt})
}

func (t *Tx) unlistOrderRefund(s Step) error {
	return t.bucket(bOrderRefunds).Delete(orderRefundKey(s.Args.Order, s.Workflow, s.N))
}

// OrderRefunds are the refunds on order that count as spent, in any
// workflow, oldest reservation first. It reads the order's entries only,
// whatever the history.
func (t *Tx) OrderRefunds(order string) ([]OrderRefund, error) {
	prefix := append([]byte(order), 0)
	var out []OrderRefund
	err := walk(t.bucket(bOrderRefunds), prefix, prefixEnd(prefix), func(k, v []byte) error {
		var r OrderRefund
		if err := decodeJSON(bOrderRefunds, k, v, &r); err != nil {
			return err
		}
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("refunds of order %s: %w", order, err)
	}
	slices.SortStableFunc(out, func(a, b OrderRefund) int { return a.ReservedAt.Compare(b.ReservedAt) })
	return out, nil
}

// refundSpent reports whether s is a refund that counts as spent.
func refundSpent(s Step) bool {
	return s.Tool == tool.IssueRefund && s.Status.Spent()
}

// buildOrderRefunds lists every spent refund of a store written before
// bOrderRefunds existed, once: on bbolt and on PostgreSQL alike, the meta
// mark says it was done. Sidecars of a fleet opening an old database
// together each find the mark after the first (their writes are
// serialized), and listing a refund twice writes the same key.
func (db *DB) buildOrderRefunds() error {
	var built bool
	if err := db.View(func(tx *Tx) error {
		built = tx.bucket(bMeta).Get(metaOrderRefundsBuilt) != nil
		return nil
	}); err != nil || built {
		return err
	}
	return db.Update(func(tx *Tx) error {
		if tx.bucket(bMeta).Get(metaOrderRefundsBuilt) != nil {
			return nil
		}
		err := tx.AllSteps(func(s Step) error {
			if !refundSpent(s) {
				return nil
			}
			return tx.listOrderRefund(s, tx.stepUser(s))
		})
		if err != nil {
			return fmt.Errorf("list the refunds of every order: %w", err)
		}
		return tx.bucket(bMeta).Put(metaOrderRefundsBuilt, []byte{1})
	})
}
