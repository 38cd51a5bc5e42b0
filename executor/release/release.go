// Package release activates policy bundles through the gate and keeps their
// history durable in the store: every attempt with its revision, digest,
// who (and, for a change that needed two operators, who proposed it), when,
// the limit changes, the gate's failures, the replay of recent decisions
// against it, the review a second operator reads (package review: the
// Rego and data diffs and the new allowances) and its standing (active,
// superseded, rejected, awaiting a second operator, approved), and the
// bytes of each bundle so a restart loads the active one again without
// asking anybody and an earlier one can be rolled back to.
package release

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/countersign/countersign/executor/audit"
	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/impact"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/review"
	"github.com/countersign/countersign/executor/store"
)

// History is policy.History on the store. Each attempt is also an audit
// record, written in the same transaction.
type History struct {
	DB  *store.DB
	Log *audit.Log // optional
}

var _ policy.History = History{}

// ErrActiveChanged means another bundle was activated (through another
// sidecar on a shared store) between the gate's comparison and the
// activation: the candidate was checked against a bundle no longer in
// force, so it is not activated. Offering it again checks it against the
// new one.
var ErrActiveChanged = errors.New("release: another bundle was activated while this one was checked")

// ErrNotAwaiting means a bundle approved by a second operator was not
// awaiting one (already active, rejected, or never proposed).
var ErrNotAwaiting = errors.New("release: the bundle is not awaiting a second operator")

// Record implements policy.History. The activation of a bundle a second
// operator approved also marks its awaiting record approved. An activation
// whose r.Replaces is no longer the active bundle is refused with
// ErrActiveChanged, in the transaction that would record it.
func (h History) Record(ctx context.Context, r policy.HistoryRecord) error {
	rec := store.BundleRecord{
		Revision: r.Revision, Digest: r.Digest, Status: store.BundleStatus(r.Status), By: r.By, Proposer: r.Proposer, At: r.At,
		BreakGlass: r.BreakGlass, Reason: r.Reason, Rollback: r.Rollback, TestFailures: r.TestFailures,
	}
	for _, c := range r.Changes {
		rec.LimitChanges = append(rec.LimitChanges, store.LimitChange(c))
	}
	for _, f := range r.Failures {
		rec.Failures = append(rec.Failures, store.BundleFailure{Case: f.Case, Amount: f.Amount, Expected: f.Expected, Got: f.Got,
			ExpectedRule: f.ExpectedRule, GotRule: f.GotRule})
	}
	if r.Impact != nil {
		b, err := json.Marshal(r.Impact)
		if err != nil {
			return fmt.Errorf("record bundle %s: impact: %w", r.Digest, err)
		}
		rec.Impact = b
	}
	if r.Review != nil {
		b, err := json.Marshal(r.Review)
		if err != nil {
			return fmt.Errorf("record bundle %s: review: %w", r.Digest, err)
		}
		rec.Review = b
	}
	return h.DB.Update(func(tx *store.Tx) error {
		if active := tx.ActiveDigest(); rec.Status == store.BundleActive && active != r.Replaces {
			return fmt.Errorf("%w: %s replaced %s; offer %s again to have it checked against the bundle now in force",
				ErrActiveChanged, active, orNone(r.Replaces), r.Revision)
		}
		if rec.Status == store.BundleActive && rec.Proposer != "" {
			if _, err := tx.ApproveAwaiting(rec.Digest); err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
		}
		if _, err := tx.AppendBundle(rec, r.Bundle); err != nil {
			return err
		}
		if h.Log == nil {
			return nil
		}
		_, err := h.Log.Append(tx, auditRecord(rec, r.Impact, r.Review))
		return err
	})
}

func orNone(digest string) string {
	if digest == "" {
		return "no bundle"
	}
	return digest
}

// auditRecord is the audit chain's record of a bundle attempt, with a
// summary of the replay (imp, an impact.Report when one was made) and of
// the review (rv, a review.Review): everything a reviewer needs to follow
// it without the history.
func auditRecord(rec store.BundleRecord, imp, rv any) audit.Record {
	failures := make([]string, 0, len(rec.Failures))
	for _, f := range rec.Failures {
		what := f.Amount.String()
		if f.Case == policy.LimitChangeUndeclared {
			what = f.Case
		}
		failures = append(failures, fmt.Sprintf("%s: expected %s got %s", what, f.Expected, f.Got))
	}
	changes := make([]string, 0, len(rec.LimitChanges))
	for _, c := range rec.LimitChanges {
		changes = append(changes, fmt.Sprintf("%s %d -> %d", c.Name, c.From, c.To))
	}
	detail := map[string]any{
		"revision": rec.Revision, "digest": rec.Digest, "status": string(rec.Status), "break_glass": rec.BreakGlass,
		"reason": rec.Reason, "failures": failures, "test_failures": len(rec.TestFailures), "limit_changes": changes,
	}
	if rec.Proposer != "" {
		detail["proposer"] = rec.Proposer
	}
	if rec.Rollback {
		detail["rollback"] = true
	}
	if r, ok := imp.(impact.Report); ok {
		flips := make([]string, 0, len(r.Changed))
		for _, c := range r.Changed {
			flips = append(flips, fmt.Sprintf("%d %s -> %s (%s)", c.Count, c.From, c.To, c.Rule))
		}
		detail["impact"] = map[string]any{"replayed": r.Replayed, "changed": flips}
	}
	if r, ok := rv.(review.Review); ok {
		detail["review"] = map[string]any{"second_operator": r.SecondOperator, "modules_changed": len(r.Diff),
			"data_changed": len(r.DataDiff), "new_allowances": r.NewAllowances.Count}
	}
	return audit.Record{At: rec.At, Kind: audit.KindBundle, Actor: rec.By, Detail: detail}
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

// Preview is what activating archive would do, with nothing activated or
// recorded: the gate against the active bundle, the replay of the recent
// decisions against it, and the review a second operator would see.
func (s *Service) Preview(ctx context.Context, archive []byte) (policy.Report, impact.Report, review.Review, error) {
	b, err := s.policy.Load(archive)
	if err != nil {
		return policy.Report{}, impact.Report{}, review.Review{}, err
	}
	report, err := s.policy.Preview(ctx, b)
	if err != nil {
		return report, impact.Report{}, review.Review{}, err
	}
	imp, logged, err := s.replay(ctx, b)
	if err != nil {
		return report, impact.Report{}, review.Review{}, err
	}
	rv, err := s.review(ctx, b, logged)
	return report, imp, rv, err
}

// Activate loads a bundle archive and activates it through the gate (see
// policy.Engine.Activate: a change that loosens a limit, or breaks the
// glass, waits for a second operator, and the error says so). The replay
// of recent decisions against it is kept with its record.
func (s *Service) Activate(ctx context.Context, archive []byte, a policy.Activation) (store.BundleRecord, policy.Report, error) {
	b, err := s.policy.Load(archive)
	if err != nil {
		return store.BundleRecord{}, policy.Report{}, err
	}
	return s.activate(ctx, b, a)
}

// Approve is the second operator's approval of a bundle awaiting one: it
// is activated through the gate as the active bundle then stands, with by
// as the activating operator and the proposer on the record.
// store.ErrNotFound when the history has no such bundle, ErrNotAwaiting
// when it does not await a second operator, policy.ErrSameOperator when by
// proposed it.
func (s *Service) Approve(ctx context.Context, digest, by string) (store.BundleRecord, policy.Report, error) {
	var rec store.BundleRecord
	var blob []byte
	err := s.db.View(func(tx *store.Tx) (err error) {
		if blob, err = tx.BundleBytes(digest); err != nil {
			return err
		}
		rec, err = tx.Awaiting(digest)
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("bundle %s: %w", digest, ErrNotAwaiting)
		}
		return err
	})
	if err != nil {
		return store.BundleRecord{}, policy.Report{}, err
	}
	b, err := s.policy.Load(blob)
	if err != nil {
		return store.BundleRecord{}, policy.Report{}, err
	}
	a := policy.Activation{By: by, Proposer: rec.By, BreakGlass: rec.BreakGlass, Reason: rec.Reason, Rollback: rec.Rollback}
	return s.activate(ctx, b, a)
}

// Rollback activates again a bundle the history holds, through the same
// gate and rules, its limits declared by the request itself.
func (s *Service) Rollback(ctx context.Context, digest, by string) (store.BundleRecord, policy.Report, error) {
	var blob []byte
	if err := s.db.View(func(tx *store.Tx) (err error) { blob, err = tx.BundleBytes(digest); return err }); err != nil {
		return store.BundleRecord{}, policy.Report{}, err
	}
	b, err := s.policy.Load(blob)
	if err != nil {
		return store.BundleRecord{}, policy.Report{}, err
	}
	return s.activate(ctx, b, policy.Activation{By: by, Rollback: true})
}

func (s *Service) activate(ctx context.Context, b *policy.Bundle, a policy.Activation) (store.BundleRecord, policy.Report, error) {
	// The gate compares b with the bundle it replaces: on a store several
	// sidecars share, that is the one the store records, which another
	// sidecar may have activated since this one loaded its own.
	if err := s.Follow(ctx); err != nil {
		return store.BundleRecord{}, policy.Report{}, err
	}
	if err := s.withReview(ctx, b, &a); err != nil {
		return store.BundleRecord{}, policy.Report{}, err
	}
	report, err := s.policy.Activate(ctx, b, a)
	var aw *policy.AwaitingError
	if errors.As(err, &aw) {
		// The awaiting record is what the second operator reads.
		rec, recErr := s.Record(ctx, b.Digest())
		return rec, report, errors.Join(err, recErr)
	}
	if err != nil {
		return store.BundleRecord{}, report, err
	}
	rec, err := s.Active(ctx)
	return rec, report, err
}

// withReview puts the replay of recent decisions against b, and the
// review of b against the bundle it would replace, in a. A bundle the
// replay cannot evaluate (a forbidden built-in, a deadline) is the gate's
// to refuse and record; it gets no impact, and its review says it could
// not be evaluated. The review is of the bundle in force now; whether a
// second operator is needed is the policy engine's to decide, under its
// activation lock, against the bundle it then replaces.
func (s *Service) withReview(ctx context.Context, b *policy.Bundle, a *policy.Activation) error {
	imp, logged, err := s.replay(ctx, b)
	if err == nil {
		a.Impact = imp
	}
	rv, err := s.review(ctx, b, logged)
	if err != nil {
		return err
	}
	a.Review = rv
	return nil
}

// replay evaluates the recent decisions against b; it also returns the
// inputs of the most recent of them, newest first, for the review (which
// takes review.MaxLogged distinct ones).
func (s *Service) replay(ctx context.Context, b *policy.Bundle) (impact.Report, []policy.Input, error) {
	var decisions []store.Decision
	if err := s.db.View(func(tx *store.Tx) (err error) {
		decisions, err = tx.LastDecisions(impact.DefaultLast)
		return err
	}); err != nil {
		return impact.Report{}, nil, err
	}
	var logged []policy.Input
	for i := len(decisions) - 1; i >= 0 && len(logged) < 4*review.MaxLogged; i-- {
		if in, err := engine.UnmarshalInput(decisions[i].Input); len(decisions[i].Input) > 0 && err == nil {
			logged = append(logged, in)
		}
	}
	imp, err := impact.Replay(ctx, b, decisions)
	return imp, logged, err
}

// review is b's review against the bundle it would replace now.
func (s *Service) review(ctx context.Context, b *policy.Bundle, logged []policy.Input) (review.Review, error) {
	ref, err := s.policy.Reference()
	if err != nil {
		return review.Review{}, err
	}
	return review.New(ctx, ref, b, logged)
}

// ActivateBundle is Activate for a bundle already loaded (serve --bundle,
// tests), compared, like any, with the bundle the store records as
// active. When that one no longer loads here (unsigned, and a signature is
// now required), b replaces it and is compared with the baseline limits.
func (s *Service) ActivateBundle(ctx context.Context, b *policy.Bundle, a policy.Activation) (policy.Report, error) {
	if err := s.Follow(ctx); err != nil {
		if err := s.db.View(func(tx *store.Tx) error { a.Replacing = tx.ActiveDigest(); return nil }); err != nil {
			return policy.Report{}, err
		}
	}
	if err := s.withReview(ctx, b, &a); err != nil {
		return policy.Report{}, err
	}
	return s.policy.Activate(ctx, b, a)
}

// Follow loads the bundle the store records as active when it is not the
// one the policy holds (another sidecar on the same store activated it);
// otherwise it does nothing. On a store no bundle was activated in, it does
// nothing either.
func (s *Service) Follow(ctx context.Context) error {
	var digest string
	if err := s.db.View(func(tx *store.Tx) error { digest = tx.ActiveDigest(); return nil }); err != nil {
		return err
	}
	if b := s.policy.Active(); digest == "" || (b != nil && b.Digest() == digest) {
		return nil
	}
	return s.Restore(ctx)
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

// Record returns the last record of the bundle with digest: the one
// awaiting a second operator, for one that does. store.ErrNotFound when
// the history has none.
func (s *Service) Record(ctx context.Context, digest string) (store.BundleRecord, error) {
	var rec store.BundleRecord
	err := s.db.View(func(tx *store.Tx) (err error) { rec, err = tx.LastBundle(digest); return err })
	return rec, err
}

// Archive returns the .tar.gz of a bundle the history holds, by digest,
// byte for byte as it was uploaded (its sha256 is the digest), for a
// reader who diffs two bundles or keeps a copy. store.ErrNotFound when
// the history has none.
func (s *Service) Archive(ctx context.Context, digest string) ([]byte, error) {
	var blob []byte
	err := s.db.View(func(tx *store.Tx) (err error) { blob, err = tx.BundleBytes(digest); return err })
	return blob, err
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
