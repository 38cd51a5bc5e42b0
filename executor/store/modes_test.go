package store_test

import (
	"testing"
	"time"

	"github.com/countersign/countersign/executor/breaker"
	"github.com/countersign/countersign/executor/store"
)

// A mode setting and the breakers survive closing and opening the store,
// and a reset clears one tool's breakers only, naming the tripped ones.
func TestModesAndBreakersAreDurable(t *testing.T) {
	eachPlace(t, func(t *testing.T, open opener) {
		db := open(t)
		at := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
		lim := breaker.Limits{Window: time.Minute, MaxFailures: 1}
		err := db.Update(func(tx *store.Tx) error {
			if err := tx.SetMode("issue_refund", store.ModeSetting{Mode: "shadow", By: "ops-ida", Reason: "new agent", At: at}); err != nil {
				return err
			}
			for _, b := range []store.Breaker{{Tool: "issue_refund", AgentVersion: "v2"}, {Tool: "issue_refund", AgentVersion: "v1"}, {Tool: "reship_order", AgentVersion: "v2"}} {
				b.State, _ = b.Record(at, lim, "policy_denied R3")
				if b.AgentVersion == "v1" {
					b.State = breaker.State{Failures: b.Failures}
				}
				if err := tx.PutBreaker(b); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		db = open(t)
		err = db.Update(func(tx *store.Tx) error {
			m, ok, err := tx.Mode("issue_refund")
			if err != nil || !ok || m.Mode != "shadow" || m.Reason != "new agent" || !m.At.Equal(at) {
				t.Errorf("mode after reopen: %+v %v %v", m, ok, err)
			}
			if _, ok, err := tx.Mode("reship_order"); ok || err != nil {
				t.Errorf("reship_order has a mode setting (%v) nobody made", err)
			}
			b, err := tx.Breaker("issue_refund", "v2")
			if err != nil || !b.Tripped() || b.Trip.Last != "policy_denied R3" {
				t.Errorf("v2's refund breaker after reopen: %+v %v", b, err)
			}
			tripped, err := tx.ResetBreakers("issue_refund")
			if err != nil || len(tripped) != 1 || tripped[0].AgentVersion != "v2" {
				t.Errorf("reset named %+v (%v), want v2's breaker", tripped, err)
			}
			if left, _ := tx.Breakers("issue_refund"); len(left) != 0 {
				t.Errorf("refund breakers after reset: %+v", left)
			}
			if b, _ := tx.Breaker("reship_order", "v2"); !b.Tripped() {
				t.Error("resetting issue_refund reset reship_order's breaker too")
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}
