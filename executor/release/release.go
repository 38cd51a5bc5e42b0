// Package release activates policy bundles through the gate and keeps their
// history durable in the store: every attempt with its revision, digest,
// who, when, the gate's failures and its standing (active, superseded,
// rejected), and the bytes of each bundle so a restart loads the active one
// again without asking anybody.
package release

import (
	"context"
	"errors"
	"fmt"

	"github.com/countersign/countersign/executor/audit"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/store"
)

// History is policy.History on the store. Each attempt is also an audit
// record, written in the same transaction.
type History struct {
	DB  *store.DB
	Log *audit.Log // optional
}

var _ policy.History = History{}

// Record implements policy.History.
func (h History) Record(ctx context.Context, r policy.HistoryRecord) error {
	rec := store.BundleRecord{
		Revision: r.Revision, Digest: r.Digest, Status: store.BundleStatus(r.Status), By: r.By, At: r.At,
		BreakGlass: r.BreakGlass, Reason: r.Reason, TestFailures: r.TestFailures,
	}
	for _, f := range r.Failures {
		rec.Failures = append(rec.Failures, store.BundleFailure{Case: f.Case, Amount: f.Amount, Expected: f.Expected, Got: f.Got})
	}
	return h.DB.Update(func(tx *store.Tx) error {
		if _, err := tx.AppendBundle(rec, r.Bundle); err != nil {
			return err
		}
		if h.Log == nil {
			return nil
		}
		failures := make([]string, 0, len(rec.Failures))
		for _, f := range rec.Failures {
			failures = append(failures, fmt.Sprintf("%s: expected %s got %s", f.Amount, f.Expected, f.Got))
		}
		_, err := h.Log.Append(tx, audit.Record{At: r.At, Kind: audit.KindBundle, Actor: r.By, Detail: map[string]any{
			"revision": r.Revision, "digest": r.Digest, "status": string(r.Status), "break_glass": r.BreakGlass,
			"reason": r.Reason, "failures": failures, "test_failures": len(r.TestFailures),
		}})
		return err
	})
}

// Service activates bundles and answers for their history.
type Service struct {
	db     *store.DB
	policy *policy.Engine
}

// New returns a Service. pol must record into History{DB: db}.
func New(db *store.DB, pol *policy.Engine) *Service {
	return &Service{db: db, policy: pol}
}

// Activate loads a bundle archive and activates it through the gate, or
// without it for a break-glass activation (the caller checks the role).
func (s *Service) Activate(ctx context.Context, archive []byte, a policy.Activation) (store.BundleRecord, policy.Report, error) {
	b, err := policy.LoadArchive(archive)
	if err != nil {
		return store.BundleRecord{}, policy.Report{}, err
	}
	report, err := s.policy.Activate(ctx, b, a)
	if err != nil {
		return store.BundleRecord{}, report, err
	}
	rec, err := s.Active(ctx)
	return rec, report, err
}

// ActivateBundle is Activate for a bundle already loaded (dev mode, tests).
func (s *Service) ActivateBundle(ctx context.Context, b *policy.Bundle, a policy.Activation) (policy.Report, error) {
	return s.policy.Activate(ctx, b, a)
}

// Restore loads the bundle the history records as active. It reports
// store.ErrNotFound when no bundle was ever activated.
func (s *Service) Restore(ctx context.Context) error {
	var blob []byte
	err := s.db.View(func(tx *store.Tx) (err error) {
		_, blob, err = tx.ActiveBundle()
		return err
	})
	if err != nil {
		return fmt.Errorf("restore active bundle: %w", err)
	}
	b, err := policy.LoadArchive(blob)
	if err != nil {
		return fmt.Errorf("restore active bundle: %w", err)
	}
	if err := s.policy.Restore(b); err != nil {
		return fmt.Errorf("restore active bundle: %w", err)
	}
	return nil
}

// History returns every activation attempt, oldest first.
func (s *Service) History(ctx context.Context) ([]store.BundleRecord, error) {
	var out []store.BundleRecord
	err := s.db.View(func(tx *store.Tx) (err error) { out, err = tx.Bundles(); return err })
	return out, err
}

// Active returns the active bundle's record.
func (s *Service) Active(ctx context.Context) (store.BundleRecord, error) {
	var rec store.BundleRecord
	err := s.db.View(func(tx *store.Tx) (err error) { rec, _, err = tx.ActiveBundle(); return err })
	if errors.Is(err, store.ErrNotFound) {
		return rec, policy.ErrNoBundle
	}
	return rec, err
}
