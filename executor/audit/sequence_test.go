package audit_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/executor/audit"
	"github.com/countersign/countersign/executor/pgtest"
	"github.com/countersign/countersign/executor/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func openFleetStore(t *testing.T, url string) *store.DB {
	t.Helper()
	db, err := store.OpenPostgres(context.Background(), url, store.PostgresOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// On a shared store, records written concurrently through two sidecars
// wait pending (durable, unchained), and the sequencer of either chains
// every one of them once: the chain verifies, holds them all, and nothing
// is left pending. A second sequencer finds the lease held and does
// nothing until it expires.
func TestSequencerChainsAFleetsRecords(t *testing.T) {
	url := pgtest.URL(t)
	a, b := openFleetStore(t, url), openFleetStore(t, url)
	c := &clock{now: t0}
	log := audit.New(audit.Options{Clock: c})
	const writers, each = 8, 10
	var wg sync.WaitGroup
	for w := range writers {
		db := []*store.DB{a, b}[w%2]
		wg.Go(func() {
			for i := range each {
				err := db.Batch(func(tx *store.Tx) error {
					_, err := log.Append(tx, audit.Record{Kind: audit.KindDecision, Actor: "engine",
						Workflow: fmt.Sprintf("W%d", w), N: i + 1})
					return err
				})
				if err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	rep, err := audit.Verify(b)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Records != 0 || rep.Unsequenced != writers*each || !rep.OldestUnsequenced.Equal(t0) {
		t.Fatalf("before sequencing: %d chained, %d pending since %s; want 0, %d since %s",
			rep.Records, rep.Unsequenced, rep.OldestUnsequenced, writers*each, t0)
	}

	n, err := log.Sequence(a, "sidecar-a", time.Second)
	if err != nil || n != writers*each {
		t.Fatalf("sidecar-a sequenced %d (%v), want %d", n, err, writers*each)
	}
	mustAppend(t, b, log, audit.Record{Kind: audit.KindAlert, Actor: "monitor"})
	if n, err := log.Sequence(b, "sidecar-b", time.Second); err != nil || n != 0 {
		t.Errorf("sidecar-b sequenced %d (%v) while sidecar-a holds the lease, want 0", n, err)
	}
	c.Advance(2 * time.Second)
	if n, err := log.Sequence(b, "sidecar-b", time.Second); err != nil || n != 1 {
		t.Errorf("sidecar-b sequenced %d (%v) after sidecar-a's lease expired, want 1", n, err)
	}
	rep, err = audit.Verify(a)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK || rep.Records != writers*each+1 || rep.Unsequenced != 0 {
		t.Errorf("after sequencing: ok %v, %d chained, %d pending; want ok, %d, 0", rep.OK, rep.Records, rep.Unsequenced, writers*each+1)
	}
}

// Two sequencers whose leases are over as they are taken, so that each
// may always sequence, race each other and the writers: their passes
// conflict on the rows both write, one runs again, and the chain holds
// every record once, in one line that verifies.
func TestRacingSequencersKeepOneChain(t *testing.T) {
	url := pgtest.URL(t)
	a, b := openFleetStore(t, url), openFleetStore(t, url)
	log := audit.New(audit.Options{Clock: &clock{now: t0}})
	const records = 200
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for i, db := range []*store.DB{a, b} {
		wg.Go(func() {
			for {
				if _, err := log.Sequence(db, fmt.Sprintf("sidecar-%d", i), -time.Second); err != nil {
					t.Error(err)
				}
				select {
				case <-stop:
					return
				default:
				}
			}
		})
	}
	for i := range records {
		mustAppend(t, []*store.DB{a, b}[i%2], log, audit.Record{Kind: audit.KindDecision, Actor: "engine", Workflow: "W1", N: i + 1})
	}
	close(stop)
	wg.Wait()
	if _, err := log.Sequence(a, "sidecar-0", -time.Second); err != nil {
		t.Fatal(err)
	}
	rep, err := audit.Verify(b)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK || rep.Records != records || rep.Unsequenced != 0 {
		t.Errorf("after racing sequencers: ok %v, %d chained, %d pending; want ok, %d, 0", rep.OK, rep.Records, rep.Unsequenced, records)
	}
}
