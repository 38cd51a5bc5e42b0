package reconcile_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/executor/dispatch"
	"github.com/countersign/countersign/executor/reconcile"
	"github.com/countersign/countersign/executor/store"
)

type fixedClock time.Time

func (c fixedClock) Now() time.Time { return time.Time(c) }

// fakes records the order in which the job reads its inputs.
type fakes struct {
	mu        sync.Mutex
	reads     []string
	records   reconcile.Records
	entries   []dispatch.Entry
	shipments []dispatch.Shipment
	ledgerErr error
}

func (f *fakes) read(what string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads = append(f.reads, what)
}

func (f *fakes) options() reconcile.Options {
	return reconcile.Options{
		Records: reconcile.RecordsFunc(func(context.Context) (reconcile.Records, error) {
			f.read("records")
			return f.records, nil
		}),
		Ledger: reconcile.LedgerFunc(func(context.Context) ([]dispatch.Entry, error) {
			f.read("ledger")
			return f.entries, f.ledgerErr
		}),
		Shipments: reconcile.ShipmentsFunc(func(context.Context) ([]dispatch.Shipment, error) {
			f.read("shipments")
			return f.shipments, nil
		}),
		Clock: fixedClock(t0.Add(time.Hour)),
	}
}

func TestOptionsValidateListsEveryProblem(t *testing.T) {
	_, err := reconcile.New(reconcile.Options{AutoLimit: -1})
	if !errors.Is(err, reconcile.ErrOptions) {
		t.Fatalf("New: %v, want ErrOptions", err)
	}
	for _, want := range []string{"Records", "Ledger", "Shipments", "AutoLimit"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}

// TestJobRunAndLatest: the latest report is the last successful run's,
// kept in memory or, with Options.Reports, in the store, where another
// sidecar's job on it reads the same report.
func TestJobRunAndLatest(t *testing.T) {
	t.Run("in memory", func(t *testing.T) { runAndLatest(t, nil) })
	t.Run("in the store", func(t *testing.T) {
		db, err := store.Open(filepath.Join(t.TempDir(), "state.db"), store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		r := runAndLatest(t, db)
		other, err := reconcile.New(reconcile.Options{Records: reconcile.FromStore(db), Ledger: reconcile.LedgerFunc(nil),
			Shipments: reconcile.ShipmentsFunc(nil), Reports: db})
		if err != nil {
			t.Fatal(err)
		}
		if latest, ok, err := other.Latest(); err != nil || !ok || mustJSON(t, latest) != mustJSON(t, r) {
			t.Errorf("another job on the store: Latest = %v, %v, %s; want the run's report", ok, err, mustJSON(t, latest))
		}
	})
}

// runAndLatest runs a job keeping its reports in db (nil: in memory) and
// returns its good report.
func runAndLatest(t *testing.T, db *store.DB) reconcile.Report {
	f := &fakes{
		records: reconcile.Records{Steps: []store.Step{refund("W1", 1, "O-1001", 3000, store.StepDone)}},
		entries: []dispatch.Entry{refundEntry("L1", key("W1", 1), "O-1001", 3000)},
	}
	o := f.options()
	o.Reports = db
	j, err := reconcile.New(o)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := j.Latest(); ok || err != nil {
		t.Fatalf("Latest before any run: %v, %v; want none", ok, err)
	}
	r, err := j.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if r.Count(reconcile.Matched) != 1 || !r.Clean() || !r.At.Equal(t0.Add(time.Hour)) || r.AutoLimit != reconcile.DefaultAutoLimit {
		t.Errorf("report %+v", r)
	}
	if got := strings.Join(f.reads, ","); got != "records,ledger,shipments" {
		t.Errorf("read order %s: the agent's records must be read before the systems of record", got)
	}
	latest, ok, err := j.Latest()
	if err != nil || !ok || mustJSON(t, latest) != mustJSON(t, r) {
		t.Errorf("Latest = %v, %s; want the run's report", ok, mustJSON(t, latest))
	}

	// A failed read makes no report and keeps the last good one.
	f.ledgerErr = errors.New("connection refused")
	if _, err := j.Run(context.Background()); !errors.Is(err, reconcile.ErrRead) || !strings.Contains(err.Error(), "ledger") {
		t.Errorf("Run with the ledger down: %v, want ErrRead naming the ledger", err)
	}
	if again, _, _ := j.Latest(); mustJSON(t, again) != mustJSON(t, r) {
		t.Error("a failed run replaced the latest report")
	}
	return r
}

func TestRunEvery(t *testing.T) {
	f := &fakes{}
	j, err := reconcile.New(f.options())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runs := make(chan reconcile.Report)
	errc := make(chan error, 1)
	go func() {
		errc <- j.RunEvery(ctx, time.Millisecond, func(r reconcile.Report, err error) {
			if err != nil {
				t.Errorf("run: %v", err)
			}
			select {
			case runs <- r:
			case <-ctx.Done():
			}
		})
	}()
	for range 3 {
		if r := <-runs; !r.Clean() {
			t.Errorf("run on empty books: %+v", r)
		}
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("RunEvery returned %v, want context.Canceled", err)
	}
	if err := j.RunEvery(context.Background(), 0, nil); !errors.Is(err, reconcile.ErrOptions) {
		t.Errorf("RunEvery with interval 0: %v", err)
	}
}
