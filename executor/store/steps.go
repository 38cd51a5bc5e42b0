package store

import (
	"encoding/binary"
	"fmt"

	"github.com/countersign/countersign/executor/identity"
	"github.com/countersign/countersign/executor/money"
)

// stepKey is workflow id, NUL, n as 4 big-endian bytes: a workflow's steps
// are contiguous and in order.
func stepKey(wf string, n int) []byte {
	k := make([]byte, 0, len(wf)+5)
	k = append(k, wf...)
	k = append(k, 0)
	return binary.BigEndian.AppendUint32(k, uint32(n))
}

// callKey is workflow id, NUL, call hash.
func callKey(wf, call string) []byte {
	return append(append([]byte(wf), 0), call...)
}

// Step returns step n of workflow wf.
func (t *Tx) Step(wf string, n int) (Step, error) {
	var s Step
	if err := t.getJSON(bSteps, stepKey(wf, n), &s); err != nil {
		return Step{}, fmt.Errorf("step %s/%d: %w", wf, n, err)
	}
	return s, nil
}

// Steps returns the steps of workflow wf in order.
func (t *Tx) Steps(wf string) ([]Step, error) {
	prefix := append([]byte(wf), 0)
	var out []Step
	err := walk(t.bucket(bSteps), prefix, prefixEnd(prefix), func(k, v []byte) error {
		var s Step
		if err := decodeJSON(bSteps, k, v, &s); err != nil {
			return err
		}
		out = append(out, s)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// StepByCall returns the first step of workflow wf that proposed the call
// with hash call (tool.CallHash), or ErrNotFound.
func (t *Tx) StepByCall(wf, call string) (Step, error) {
	raw := t.bucket(bCalls).Get(callKey(wf, call))
	if raw == nil {
		return Step{}, ErrNotFound
	}
	return t.Step(wf, int(binary.BigEndian.Uint32(raw)))
}

// PutStep stores s and keeps the call index, the spending indexes (the
// order's list of refunds among them) and the reship index consistent
// with its status: a refund is added to the spending indexes when it
// enters a spent status (s.ReservedAt must then be set) and removed when
// it leaves; a reship is counted for its order the same way.
func (t *Tx) PutStep(s Step) error {
	key := stepKey(s.Workflow, s.N)
	var old Step
	hadOld := t.getJSON(bSteps, key, &old) == nil
	if hadOld && old.Call != s.Call {
		if err := t.unindexCall(old); err != nil {
			return err
		}
	}
	if s.Status != StepSuppressed {
		if err := t.indexCall(s); err != nil {
			return err
		}
	}
	wasSpent := hadOld && refundSpent(old)
	isSpent := refundSpent(s)
	switch {
	case wasSpent && !isSpent:
		if err := t.unspend(old); err != nil {
			return err
		}
	case !wasSpent && isSpent:
		if s.ReservedAt.IsZero() {
			return fmt.Errorf("step %s/%d: spent status %s without a reservation time", s.Workflow, s.N, s.Status)
		}
		if err := t.spend(s); err != nil {
			return err
		}
	case wasSpent && isSpent && (old.Args != s.Args || !old.ReservedAt.Equal(s.ReservedAt)):
		return fmt.Errorf("step %s/%d: arguments or reservation of a started refund cannot change", s.Workflow, s.N)
	}
	if err := t.followReships(old, hadOld, s); err != nil {
		return err
	}
	return t.putJSON(bSteps, key, s)
}

func (t *Tx) indexCall(s Step) error {
	b := t.bucket(bCalls)
	k := callKey(s.Workflow, s.Call)
	if b.Get(k) != nil {
		return nil // an earlier step owns this call
	}
	return b.Put(k, binary.BigEndian.AppendUint32(nil, uint32(s.N)))
}

func (t *Tx) unindexCall(s Step) error {
	b := t.bucket(bCalls)
	k := callKey(s.Workflow, s.Call)
	if raw := b.Get(k); raw != nil && int(binary.BigEndian.Uint32(raw)) == s.N {
		return b.Delete(k)
	}
	return nil
}

func (t *Tx) spend(s Step) error {
	if err := t.addOrderSpent(s.Args.Order, s.Args.Amount); err != nil {
		return err
	}
	user := t.stepUser(s)
	if err := t.listOrderRefund(s, user); err != nil {
		return err
	}
	if err := repSpent.put(t, user, s); err != nil {
		return err
	}
	return agentSpent.put(t, "", s)
}

func (t *Tx) unspend(s Step) error {
	if err := t.addOrderSpent(s.Args.Order, -s.Args.Amount); err != nil {
		return err
	}
	if err := t.unlistOrderRefund(s); err != nil {
		return err
	}
	if err := repSpent.delete(t, t.stepUser(s), s); err != nil {
		return err
	}
	return agentSpent.delete(t, "", s)
}

// stepUser is the key of the rep a step spends for: the user of its
// workflow, as repKey spells it.
func (t *Tx) stepUser(s Step) string {
	w, err := t.Workflow(s.Workflow)
	if err != nil {
		return ""
	}
	return repKey(w.User)
}

// repKey is the key of rep's spending: one person under every spelling
// of their sub (identity.Canonical), so that a token for REP-ANA spends
// rep-ana's day, not a day of its own.
func repKey(rep string) string {
	if c, err := identity.Canonical(rep); err == nil {
		return c
	}
	return rep
}

func (t *Tx) addOrderSpent(order string, delta money.Cents) error {
	return t.bucket(bOrderSpent).Add([]byte(order), int64(delta))
}

// OrderSpent is the sum of refunds on order in a spent status.
func (t *Tx) OrderSpent(order string) money.Cents {
	raw := t.bucket(bOrderSpent).Get([]byte(order))
	if raw == nil {
		return 0
	}
	return money.Cents(binary.BigEndian.Uint64(raw))
}

// AllSteps calls fn for every step of every workflow, in workflow order.
// It is for whole-book jobs such as reconciliation, never for a decision.
func (t *Tx) AllSteps(fn func(Step) error) error {
	return t.bucket(bSteps).ForEach(func(k, v []byte) error {
		var s Step
		if err := decodeJSON(bSteps, k, v, &s); err != nil {
			return err
		}
		return fn(s)
	})
}
