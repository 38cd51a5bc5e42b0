package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/countersign/countersign/executor/clock"
	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/store"
)

// Options wire a Job. Records, Ledger and Shipments are required.
type Options struct {
	// Records reads the agent's records (FromStore in production).
	Records RecordSource
	// Ledger lists the ledger's entries (a *dispatch.Ledger).
	Ledger Ledger
	// Shipments lists the order system's shipments (a *dispatch.Orders).
	Shipments Shipments
	// AutoLimit is the designed auto limit. Default DefaultAutoLimit. It is
	// never taken from the active bundle: a refund is held to the limit of
	// the bundle that decided it when the gate vouched for that bundle,
	// else to the stricter of this and the strictest limit known, so a
	// bundle with a wrong limit cannot hide the refunds it let through.
	AutoLimit money.Cents
	// Clock stamps each report; the drill and the tests inject a simulated
	// one. Nil means the wall clock.
	Clock clock.Clock
	// Logger receives one line per run. Default: discard.
	Logger *slog.Logger
	// Reports, when set, keeps the latest report in the store, where every
	// sidecar sharing it reads it and a restart finds it. Nil: in memory.
	Reports *store.DB
}

// Validate reports every problem with o at once.
func (o Options) Validate() error {
	var errs []error
	if o.Records == nil {
		errs = append(errs, errors.New("Records is required (reconcile.FromStore over the store)"))
	}
	if o.Ledger == nil {
		errs = append(errs, errors.New("Ledger is required (the ledger's client)"))
	}
	if o.Shipments == nil {
		errs = append(errs, errors.New("Shipments is required (the order system's client)"))
	}
	if o.AutoLimit < 0 {
		errs = append(errs, fmt.Errorf("AutoLimit %d is negative; leave it 0 for the designed %s", o.AutoLimit, DefaultAutoLimit))
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrOptions, errors.Join(errs...))
}

// Job runs reconciliations and keeps the latest report (Options.Reports).
// It is safe for concurrent use; runs are serialized.
type Job struct {
	o   Options
	log *slog.Logger

	run    sync.Mutex // one run at a time
	mu     sync.Mutex // guards latest
	latest *Report
}

// New returns a job over o.
func New(o Options) (*Job, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.AutoLimit == 0 {
		o.AutoLimit = DefaultAutoLimit
	}
	if o.Clock == nil {
		o.Clock = clock.Wall{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Job{o: o, log: o.Logger.With("component", "reconcile")}, nil
}

// Run reads the agent's records, then the ledger, then the shipments,
// classifies them and keeps the report for Latest. The agent's records are
// read first so that a step finishing during the run can only look in
// flight, never done-but-missing. A failed read returns an error wrapping
// ErrRead and leaves Latest as it was.
func (j *Job) Run(ctx context.Context) (Report, error) {
	j.run.Lock()
	defer j.run.Unlock()
	var in Input
	var err error
	if in.Records, err = j.o.Records.Records(ctx); err != nil {
		return Report{}, fmt.Errorf("%w: the agent's records: %w", ErrRead, err)
	}
	if in.Entries, err = j.o.Ledger.Entries(ctx); err != nil {
		return Report{}, fmt.Errorf("%w: the ledger's entries: %w", ErrRead, err)
	}
	if in.Shipments, err = j.o.Shipments.AllShipments(ctx); err != nil {
		return Report{}, fmt.Errorf("%w: the order system's shipments: %w", ErrRead, err)
	}
	r := Classify(in, j.o.AutoLimit)
	r.At = at(j.o.Clock.Now())
	if err := j.keep(r); err != nil {
		return r, err
	}
	j.log.Info("reconciled", "matched", r.Count(Matched), "unexplained", r.Unexplained,
		"steps", len(in.Steps), "entries", len(in.Entries), "shipments", len(in.Shipments))
	return r, nil
}

// keep makes r the latest report.
func (j *Job) keep(r Report) error {
	if j.o.Reports == nil {
		j.mu.Lock()
		defer j.mu.Unlock()
		j.latest = &r
		return nil
	}
	raw, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("keep the report: %w", err)
	}
	if err := j.o.Reports.Update(func(tx *store.Tx) error { return tx.PutReconciliation(raw) }); err != nil {
		return fmt.Errorf("keep the report: %w", err)
	}
	return nil
}

// Latest returns the report of the last successful run, by this job or,
// with Options.Reports, by any sidecar's on the same store; ok is false
// before the first. Read its maps and slices; do not modify them.
func (j *Job) Latest() (r Report, ok bool, err error) {
	if j.o.Reports == nil {
		j.mu.Lock()
		defer j.mu.Unlock()
		if j.latest == nil {
			return Report{}, false, nil
		}
		return *j.latest, true, nil
	}
	var raw []byte
	err = j.o.Reports.View(func(tx *store.Tx) (err error) { raw, err = tx.Reconciliation(); return err })
	switch {
	case errors.Is(err, store.ErrNotFound):
		return Report{}, false, nil
	case err != nil:
		return Report{}, false, fmt.Errorf("the latest report: %w", err)
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return Report{}, false, fmt.Errorf("the latest report does not decode: %w", err)
	}
	return r, true, nil
}

// RunEvery runs the job at once and then every interval until ctx ends,
// handing each outcome to done (which may be nil), for example to set a
// gauge of unexplained differences. It returns ctx's error.
func (j *Job) RunEvery(ctx context.Context, interval time.Duration, done func(Report, error)) error {
	if interval <= 0 {
		return fmt.Errorf("%w: interval %v must be positive", ErrOptions, interval)
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		r, err := j.Run(ctx)
		if err != nil && ctx.Err() == nil {
			j.log.Warn("reconciliation failed", "err", err)
		}
		if done != nil && ctx.Err() == nil {
			done(r, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}
