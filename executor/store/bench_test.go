package store_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign/executor/store"
)

// BenchmarkWriteStep measures the decision's write transaction as the
// engine runs it, through Batch: read the order's total, the rep's day and
// the agent's hour, then put a refund step in a spent status, which adds
// it to those three indexes. Each goroutine has a workflow of its own and
// all share one rep and the agent, so that concurrent writers meet on the
// same totals as a busy agent's do.
//
// bbolt commits with fsync (its default). The PostgreSQL server of pgtest
// runs without fsync unless PGTEST_FSYNC=on: run it both ways to compare.
// retries/op is how often a PostgreSQL write ran again after a conflict.
func BenchmarkWriteStep(b *testing.B) {
	for _, be := range backends {
		for _, writers := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/goroutines=%d", be.name, writers), func(b *testing.B) {
				db := be.place(b)(b)
				mustUpdate(b, db, func(tx *store.Tx) error {
					for w := range writers {
						if err := tx.CreateWorkflow(store.Workflow{ID: fmt.Sprintf("W%d", w), User: "rep-ana"}); err != nil {
							return err
						}
					}
					return nil
				})
				retries := store.Retries(db)
				var done atomic.Int64
				var wg sync.WaitGroup
				b.ResetTimer()
				for w := range writers {
					wg.Go(func() {
						wf := fmt.Sprintf("W%d", w)
						for n := 1; done.Add(1) <= int64(b.N); n++ {
							at := t0.Add(time.Duration(n) * time.Millisecond)
							err := db.Batch(func(tx *store.Tx) error {
								_ = tx.OrderSpent(fmt.Sprintf("O-%d", n%10)) + tx.RepSpentSince("rep-ana", at.Add(-24*time.Hour)) +
									tx.AgentSpentSince(at.Add(-time.Hour))
								return tx.PutStep(refund(wf, n, fmt.Sprintf("O-%d", n%10), 100, store.StepStarted, at))
							})
							if err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
				b.StopTimer()
				b.ReportMetric(float64(store.Retries(db)-retries)/float64(b.N), "retries/op")
			})
		}
	}
}
