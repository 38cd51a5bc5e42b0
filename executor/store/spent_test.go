package store_test

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

var allStatuses = []store.StepStatus{store.StepPending, store.StepHeld, store.StepWaitingApproval, store.StepStarted,
	store.StepUnknown, store.StepDone, store.StepDenied, store.StepSuppressed, store.StepCompensated, store.StepShadowed}

// spendModel is what the window totals must be, computed the slow way
// from every step the test wrote.
type spendModel struct {
	users map[string]string // workflow id -> rep
	steps map[string]store.Step
}

func (m spendModel) since(rep string, since time.Time) money.Cents {
	var total money.Cents
	for _, s := range m.steps {
		if s.Tool != tool.IssueRefund || !s.Status.Spent() || s.ReservedAt.Before(since) {
			continue
		}
		if rep == "" || m.users[s.Workflow] == rep {
			total += s.Args.Amount
		}
	}
	return total
}

// randomTime is a reservation time in the three hours after t0: often on a
// second, minute or hour boundary or a nanosecond off one, else anywhere.
func randomTime(r *rand.Rand) time.Time {
	widths := []time.Duration{time.Hour, time.Minute, time.Second}
	at := t0.Add(time.Duration(r.Int64N(int64(3 * time.Hour))))
	if r.IntN(2) == 0 {
		w := widths[r.IntN(len(widths))]
		at = at.Truncate(w).Add(time.Duration(r.IntN(3)-1) * time.Nanosecond)
	}
	return at
}

// randomStep changes step n of wf at random: a new step, or a new status,
// and while it is not spent, new amount and reservation time (a started
// refund's cannot change).
func randomStep(r *rand.Rand, old store.Step, exists bool, wf string, n int) store.Step {
	s := old
	if !exists {
		s = refund(wf, n, fmt.Sprintf("O-%d", r.IntN(5)), 0, store.StepPending, time.Time{})
		if r.IntN(5) == 0 {
			s.Tool = tool.ReshipOrder
		}
	}
	if !exists || !old.Status.Spent() {
		s.Args.Amount = money.Cents(1 + r.IntN(10000))
		s.ReservedAt = randomTime(r)
		s.Call = tool.CallHash(s.Tool, s.Args)
	}
	s.Status = allStatuses[r.IntN(len(allStatuses))]
	return s
}

// sinces are the window starts checked after each round: hour, minute and
// second boundaries, a nanosecond either side of them and of every
// reservation time, and random instants, from before the first refund to
// after the last.
func sinces(r *rand.Rand, m spendModel) []time.Time {
	out := []time.Time{t0.Add(-time.Hour), t0, t0.Add(4 * time.Hour)}
	for range 30 {
		out = append(out, randomTime(r))
	}
	for _, s := range m.steps {
		out = append(out, s.ReservedAt, s.ReservedAt.Add(time.Nanosecond), s.ReservedAt.Add(-time.Nanosecond))
	}
	return out
}

// TestWindowTotalsMatchEveryStep: after random steps, statuses and
// transitions, the rep and agent totals since any instant are the sums of
// the spent refunds reserved at or after it, to the cent.
func TestWindowTotalsMatchEveryStep(t *testing.T) {
	eachBackend(t, func(t *testing.T, open opener) {
		for seed := range uint64(4) {
			t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
				t.Parallel() // on PostgreSQL, the seeds wait on round trips side by side
				r := rand.New(rand.NewPCG(seed, 11))
				db := open(t)
				m := spendModel{users: map[string]string{}, steps: map[string]store.Step{}}
				reps := []string{"rep-ana", "rep-ben", "rep-cy"}
				mustUpdate(t, db, func(tx *store.Tx) error {
					for i := range 6 {
						wf := fmt.Sprintf("W%d", i)
						m.users[wf] = reps[i%len(reps)]
						if err := tx.CreateWorkflow(store.Workflow{ID: wf, User: m.users[wf]}); err != nil {
							return err
						}
					}
					return nil
				})
				for round := range 15 {
					mustUpdate(t, db, func(tx *store.Tx) error {
						for range 20 {
							wf, n := fmt.Sprintf("W%d", r.IntN(6)), 1+r.IntN(10)
							id := fmt.Sprintf("%s/%d", wf, n)
							old, exists := m.steps[id]
							s := randomStep(r, old, exists, wf, n)
							if err := tx.PutStep(s); err != nil {
								return err
							}
							m.steps[id] = s
						}
						return nil
					})
					checkTotals(t, db, m, sinces(r, m), append(reps, "rep-nobody"))
					if t.Failed() {
						t.Fatalf("after round %d", round)
					}
				}
			})
		}
	})
}

func checkTotals(t *testing.T, db *store.DB, m spendModel, sinces []time.Time, reps []string) {
	t.Helper()
	db.View(func(tx *store.Tx) error {
		for _, since := range sinces {
			if got, want := tx.AgentSpentSince(since), m.since("", since); got != want {
				t.Errorf("AgentSpentSince(%s) = %d, want %d", since.Format(time.RFC3339Nano), got, want)
			}
			for _, rep := range reps {
				if got, want := tx.RepSpentSince(rep, since), m.since(rep, since); got != want {
					t.Errorf("RepSpentSince(%s, %s) = %d, want %d", rep, since.Format(time.RFC3339Nano), got, want)
				}
			}
		}
		return nil
	})
}

// A store written before the running sums existed gets them at Open, built
// from its spending entries.
func TestWindowTotalsBuiltForAnOlderStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := store.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := spendModel{users: map[string]string{"W": "rep-ana", "V": "rep-ben"}, steps: map[string]store.Step{}}
	r := rand.New(rand.NewPCG(7, 11))
	mustUpdate(t, db, func(tx *store.Tx) error {
		for wf, user := range m.users {
			if err := tx.CreateWorkflow(store.Workflow{ID: wf, User: user}); err != nil {
				return err
			}
		}
		for i := range 200 {
			wf := []string{"W", "V"}[i%2]
			s := randomStep(r, store.Step{}, false, wf, i)
			if err := tx.PutStep(s); err != nil {
				return err
			}
			m.steps[fmt.Sprintf("%s/%d", wf, i)] = s
		}
		return nil
	})
	db.Close()
	raw, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = raw.Update(func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket([]byte("spent_by_rep_sums")); err != nil {
			return err
		}
		return tx.DeleteBucket([]byte("spent_by_agent_sums"))
	})
	if err != nil {
		t.Fatal(err)
	}
	raw.Close()
	db, err = store.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	checkTotals(t, db, m, sinces(r, m), []string{"rep-ana", "rep-ben"})
}

// BenchmarkTotalsBusyWindow reads a rep's day and the agent's hour when the
// windows are full: 100k refunds over the day, a tenth of them the rep's,
// with window starts mid-second as a real clock gives them. Without running
// sums it walks every refund in each window.
func BenchmarkTotalsBusyWindow(b *testing.B) {
	const refunds = 100_000
	db, err := store.Open(filepath.Join(b.TempDir(), "s.db"), store.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *store.Tx) error {
		for i := range 10 {
			if err := tx.CreateWorkflow(store.Workflow{ID: fmt.Sprintf("W%d", i), User: fmt.Sprintf("rep-%d", i)}); err != nil {
				return err
			}
		}
		step := 24 * time.Hour / refunds
		for i := range refunds {
			at := t0.Add(-24 * time.Hour).Add(time.Duration(i) * step)
			if err := tx.PutStep(refund(fmt.Sprintf("W%d", i%10), i, "O-1", 1, store.StepDone, at)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	now := t0.Add(1500 * time.Millisecond)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		db.View(func(tx *store.Tx) error {
			_ = tx.RepSpentSince("rep-0", now.Add(-24*time.Hour))
			_ = tx.AgentSpentSince(now.Add(-time.Hour))
			return nil
		})
	}
}

// One person spends one day under every spelling of their sub: a workflow
// opened with a token for REP-ANA counts toward rep-ana's cap, and hers
// toward REP-ANA's.
func TestRepSpendingUnderEverySpelling(t *testing.T) {
	eachBackend(t, func(t *testing.T, open opener) {
		db := open(t)
		mustUpdate(t, db, func(tx *store.Tx) error {
			for wf, user := range map[string]string{"W-lower": "rep-ana", "W-upper": "REP-ANA", "W-full": "ＲＥＰ－ＡＮＡ", "W-ben": "rep-ben"} {
				if err := tx.CreateWorkflow(store.Workflow{ID: wf, User: user}); err != nil {
					return err
				}
				if err := tx.PutStep(refund(wf, 1, "O-1", 1000, store.StepDone, t0)); err != nil {
					return err
				}
			}
			return nil
		})
		db.View(func(tx *store.Tx) error {
			for _, rep := range []string{"rep-ana", "REP-ANA", "Rep-Ana"} {
				if got := tx.RepSpentSince(rep, t0.Add(-time.Hour)); got != 3000 {
					t.Errorf("RepSpentSince(%q) = %d, want 3000: three spellings of one rep", rep, got)
				}
			}
			if got := tx.RepSpentSince("rep-ben", t0.Add(-time.Hour)); got != 1000 {
				t.Errorf("RepSpentSince(rep-ben) = %d, want 1000", got)
			}
			return nil
		})
	})
}
