package store

import (
	"encoding/binary"
	"fmt"

	"github.com/countersign/countersign/executor/tool"
)

// bOrderReships counts, per order id, the reship steps in any workflow whose
// effect happened or may have (status started, unknown or done). Key: the
// order id; value: the count, 8 big-endian bytes; absent means zero.
var bOrderReships = []byte("reships_by_order")

// reshipCounts reports whether a reship step in status s counts toward its
// order's reships: the same statuses in which a refund counts as spent.
func reshipCounts(s Step) bool {
	return s.Tool == tool.ReshipOrder && s.Status.Spent()
}

// followReships keeps the reship index in step with one step's change from
// old (hadOld false: none) to s.
func (t *Tx) followReships(old Step, hadOld bool, s Step) error {
	was, is := hadOld && reshipCounts(old), reshipCounts(s)
	same := was && is && old.Args.Order == s.Args.Order
	if was && !same {
		if err := t.addOrderReships(old.Args.Order, -1); err != nil {
			return err
		}
	}
	if is && !same {
		return t.addOrderReships(s.Args.Order, 1)
	}
	return nil
}

func (t *Tx) addOrderReships(order string, delta int) error {
	b := t.bucket(bOrderReships)
	n := t.OrderReships(order) + delta
	switch {
	case n < 0:
		return fmt.Errorf("reships of order %s would fall below zero: the index is out of step with the steps", order)
	case n == 0:
		return b.Delete([]byte(order))
	}
	return b.Put([]byte(order), u64(uint64(n)))
}

// OrderReships is how many reship steps of order, in any workflow, are
// started, unknown or done. It reads one key, whatever the history.
func (t *Tx) OrderReships(order string) int {
	raw := t.bucket(bOrderReships).Get([]byte(order))
	if raw == nil {
		return 0
	}
	return int(binary.BigEndian.Uint64(raw))
}

// indexReships builds the reship index from every step: once, when a store
// written before the index existed is opened.
func (t *Tx) indexReships() error {
	return t.AllSteps(func(s Step) error {
		if !reshipCounts(s) {
			return nil
		}
		return t.addOrderReships(s.Args.Order, 1)
	})
}
