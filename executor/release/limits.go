package release

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"

	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/store"
)

// Limits answers, for a refund in the records, which auto limit it is
// held to: that of the bundle whose decision let it run, read from the
// bundle history. Reconciliation and the monitor judge each refund by it,
// so a refund that a since-replaced bundle allowed within its own limit
// is not an alert once a rollback has put a stricter limit in force.
//
// A bundle's own limit counts only when the gate vouched for it: the
// bundle went live through the gate (with a second operator for a
// loosening) and never by breaking the glass. Otherwise, or when the
// decision log names no bundle, or the history no longer holds or cannot
// load the one it names, the refund is held to the strictest auto limit
// known (the baseline release's and every bundle that went live), and
// Held.Fallback says why. So a bundle with a wrong limit that went live
// without the gate (p2's units mistake, released by breaking the glass)
// still cannot hide its own effects.
//
// A bundle is immutable, so its limits are loaded once per digest and
// kept. Limits is safe for concurrent use.
type Limits struct {
	mu       sync.Mutex
	byDigest map[string]policy.Limits
	baseline *policy.Limits
}

// NewLimits returns a Limits with nothing loaded yet.
func NewLimits() *Limits { return &Limits{byDigest: map[string]policy.Limits{}} }

// Held is the auto limit one refund is held to.
type Held struct {
	// RefundAuto is the deciding bundle's refund_auto; on a fallback, the
	// strictest refund_auto known.
	RefundAuto money.Cents
	// Revision and Digest name the bundle whose decision let the refund
	// run, as far as the decision log names it.
	Revision, Digest string
	// Fallback, when set, says why the refund is not held to that
	// bundle's own limit.
	Fallback string
}

// Limit is the auto limit the refund is judged against: the deciding
// bundle's own; on a fallback, the stricter of the strictest known and
// designed, the caller's own limit (0: none).
func (h Held) Limit(designed money.Cents) money.Cents {
	if h.Fallback == "" || designed <= 0 {
		return h.RefundAuto
	}
	return min(h.RefundAuto, designed)
}

// Book is the bundle history as one transaction read it. Use it within
// that transaction.
type Book struct {
	live      map[string]*liveBundle // by digest: the bundles that went live
	strictest money.Cents
}

// liveBundle is a bundle that went live, and how.
type liveBundle struct {
	revision string
	// breakGlass: it went live at least once by breaking the glass.
	breakGlass bool
	limits     policy.Limits
	unloadable error // its bytes are missing or do not load
}

// Read reads the history in tx: every bundle that went live (active or
// superseded), whether it ever did so by breaking the glass, and the
// limits of each (loaded once per digest).
func (l *Limits) Read(tx *store.Tx) (*Book, error) {
	recs, err := tx.Bundles()
	if err != nil {
		return nil, fmt.Errorf("release: read the bundle history: %w", err)
	}
	base, err := l.baselineLimits()
	if err != nil {
		return nil, err
	}
	b := &Book{live: map[string]*liveBundle{}, strictest: base.RefundAuto}
	for _, r := range recs {
		if r.Status != store.BundleActive && r.Status != store.BundleSuperseded {
			continue
		}
		lb := b.live[r.Digest]
		if lb == nil {
			lb = &liveBundle{revision: r.Revision}
			b.live[r.Digest] = lb
		}
		lb.breakGlass = lb.breakGlass || r.BreakGlass
	}
	for digest, lb := range b.live {
		if lb.limits, err = l.load(tx, digest); err != nil {
			if !errors.Is(err, errUnloadable) {
				return nil, err
			}
			lb.unloadable = err
			continue
		}
		b.strictest = min(b.strictest, lb.limits.RefundAuto)
	}
	return b, nil
}

// Strictest is the strictest refund_auto known: the baseline release's
// and that of every bundle that went live. A refund at or under it is
// within every auto limit this history has known.
func (b *Book) Strictest() money.Cents { return b.strictest }

// Of returns what a refund decided by the bundle digest (as the decision
// log names it; "" for none) is held to.
func (b *Book) Of(digest string) Held {
	if digest == "" {
		return b.fallback("", "", "the decision log names no bundle for the decision that let it run")
	}
	lb, ok := b.live[digest]
	switch {
	case !ok:
		return b.fallback("", digest, fmt.Sprintf("the bundle that decided it (%s) never went live in this bundle history", short(digest)))
	case lb.unloadable != nil:
		return b.fallback(lb.revision, digest, fmt.Sprintf("the bundle that decided it, %s, cannot be read from the bundle history (%v)", lb.revision, lb.unloadable))
	case lb.breakGlass:
		return b.fallback(lb.revision, digest, fmt.Sprintf("%s went live by breaking the glass, so the gate did not vouch for its limits (its auto limit is %s)",
			lb.revision, lb.limits.RefundAuto))
	}
	return Held{RefundAuto: lb.limits.RefundAuto, Revision: lb.revision, Digest: digest}
}

// Step returns what the refund of step n of workflow is held to: the
// bundle of the last decision the log holds for the step. That is the
// decision that let it run, because a step is decided only while it has
// not started, and the decision that reserves it is logged in the same
// transaction. Decisions made in shadow mode dispatched nothing and are
// passed over.
func (b *Book) Step(tx *store.Tx, workflow string, n int) (Held, error) {
	var last *store.Decision
	err := tx.EachDecision(store.DecisionFilter{Workflow: workflow}, func(d store.Decision) error {
		if d.N == n && !d.Shadow {
			last = &d
		}
		return nil
	})
	if err != nil {
		return Held{}, fmt.Errorf("release: the decisions of %s/%d: %w", workflow, n, err)
	}
	if last == nil {
		return b.fallback("", "", "the decision log holds no decision for this step"), nil
	}
	h := b.Of(last.Digest)
	if h.Revision == "" {
		h.Revision = last.Revision
	}
	return h, nil
}

func (b *Book) fallback(revision, digest, why string) Held {
	return Held{RefundAuto: b.strictest, Revision: revision, Digest: digest, Fallback: why + "; held to the strictest auto limit known"}
}

// errUnloadable marks a bundle of the history whose limits cannot be read:
// its bytes are missing, do not load, or are not the digest's.
var errUnloadable = errors.New("unloadable")

// load returns the limits of the history's bundle digest, from the cache
// or its bytes. An error wraps errUnloadable unless the store failed.
func (l *Limits) load(tx *store.Tx, digest string) (policy.Limits, error) {
	l.mu.Lock()
	lim, ok := l.byDigest[digest]
	l.mu.Unlock()
	if ok {
		return lim, nil
	}
	blob, err := tx.BundleBytes(digest)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return policy.Limits{}, fmt.Errorf("%w: its bytes are not in the history", errUnloadable)
	case err != nil:
		return policy.Limits{}, fmt.Errorf("release: the bytes of bundle %s: %w", short(digest), err)
	}
	if sum := sha256.Sum256(blob); hex.EncodeToString(sum[:]) != digest {
		return policy.Limits{}, fmt.Errorf("%w: the bytes kept under %s have digest %s", errUnloadable, short(digest), short(hex.EncodeToString(sum[:])))
	}
	lim, err = policy.ArchiveLimits(blob)
	if err != nil {
		return policy.Limits{}, fmt.Errorf("%w: %w", errUnloadable, err)
	}
	l.mu.Lock()
	l.byDigest[digest] = lim
	l.mu.Unlock()
	return lim, nil
}

// baselineLimits are the baseline release's limits, read once.
func (l *Limits) baselineLimits() (policy.Limits, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.baseline == nil {
		base, err := policy.BaselineLimits()
		if err != nil {
			return policy.Limits{}, fmt.Errorf("release: %w", err)
		}
		l.baseline = &base
	}
	return *l.baseline, nil
}

// short is the start of a digest, as people quote one.
func short(digest string) string {
	if len(digest) > 12 {
		return digest[:12]
	}
	return digest
}
