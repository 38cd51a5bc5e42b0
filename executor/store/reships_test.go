package store_test

import (
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

func reship(wf string, n int, order string, status store.StepStatus) store.Step {
	args := tool.Args{Order: order}
	return store.Step{Workflow: wf, N: n, Tool: tool.ReshipOrder, Args: args, Call: tool.CallHash(tool.ReshipOrder, args),
		Status: status, Created: t0}
}

// wantReships fails unless each order has the given count.
func wantReships(t *testing.T, db *store.DB, want map[string]int) {
	t.Helper()
	db.View(func(tx *store.Tx) error {
		for order, n := range want {
			if got := tx.OrderReships(order); got != n {
				t.Errorf("OrderReships(%s) = %d, want %d", order, got, n)
			}
		}
		return nil
	})
}

func TestOrderReshipsCountEffectsInEveryWorkflow(t *testing.T) {
	eachBackend(t, func(t *testing.T, open opener) {
		for _, tc := range []struct {
			name   string
			status store.StepStatus
			counts bool
		}{
			{"a done reship counts", store.StepDone, true},
			{"a started reship counts", store.StepStarted, true},
			{"an unknown reship counts", store.StepUnknown, true},
			{"a denied reship does not count", store.StepDenied, false},
			{"a suppressed reship does not count", store.StepSuppressed, false},
			{"a pending reship does not count", store.StepPending, false},
			{"a held reship does not count", store.StepHeld, false},
			{"a reship waiting for approval does not count", store.StepWaitingApproval, false},
		} {
			t.Run(tc.name, func(t *testing.T) {
				db := open(t)
				mustUpdate(t, db, func(tx *store.Tx) error {
					// One reship in each of three workflows, and a refund that
					// must not count as a reship.
					for _, wf := range []string{"W1", "W2", "W3"} {
						if err := tx.PutStep(reship(wf, 1, "O-1003", tc.status)); err != nil {
							return err
						}
						if err := tx.PutStep(reship(wf, 2, "O-1001", store.StepPending)); err != nil {
							return err
						}
						if err := tx.PutStep(refund(wf, 3, "O-1003", 100, store.StepDone, t0)); err != nil {
							return err
						}
					}
					return nil
				})
				want := 0
				if tc.counts {
					want = 3
				}
				wantReships(t, db, map[string]int{"O-1003": want, "O-1001": 0})
			})
		}
	})
}

func TestOrderReshipsFollowTransitions(t *testing.T) {
	eachBackend(t, func(t *testing.T, open opener) {
		db := open(t)
		set := func(wf string, n int, status store.StepStatus, order string) {
			t.Helper()
			mustUpdate(t, db, func(tx *store.Tx) error {
				s, err := tx.Step(wf, n)
				if err != nil {
					s = reship(wf, n, order, status)
				}
				s.Status, s.Args.Order = status, order
				return tx.PutStep(s)
			})
		}
		steps := []struct {
			name       string
			wf         string
			status     store.StepStatus
			order      string
			o1003, o01 int
		}{
			{"a proposed reship counts nothing", "W1", store.StepPending, "O-1003", 0, 0},
			{"amended to another order while pending, still nothing", "W1", store.StepPending, "O-1001", 0, 0},
			{"started, it counts for the order it names", "W1", store.StepStarted, "O-1001", 0, 1},
			{"done after started, it still counts once", "W1", store.StepDone, "O-1001", 0, 1},
			{"a reship in another workflow starts", "W2", store.StepStarted, "O-1003", 1, 1},
			{"its outcome is lost, it still counts", "W2", store.StepUnknown, "O-1003", 1, 1},
			{"refused downstream, it stops counting", "W2", store.StepDenied, "O-1003", 0, 1},
			{"a third workflow's reship is done", "W3", store.StepDone, "O-1001", 0, 2},
		}
		for _, st := range steps {
			set(st.wf, 1, st.status, st.order)
			wantReships(t, db, map[string]int{"O-1003": st.o1003, "O-1001": st.o01})
			if t.Failed() {
				t.Fatalf("after %q", st.name)
			}
		}
	})
}

// A store written before the reship index existed gets it at Open.
func TestOrderReshipsBuiltForAnOlderStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := store.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	mustUpdate(t, db, func(tx *store.Tx) error {
		for i, status := range []store.StepStatus{store.StepDone, store.StepUnknown, store.StepDenied} {
			if err := tx.PutStep(reship("W", i+1, "O-1003", status)); err != nil {
				return err
			}
		}
		return nil
	})
	db.Close()
	raw, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.Update(func(tx *bolt.Tx) error { return tx.DeleteBucket([]byte("reships_by_order")) }); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	db, err = store.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	wantReships(t, db, map[string]int{"O-1003": 2})
}
