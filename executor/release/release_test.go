package release_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/countersign/countersign/bundles"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/release"
	"github.com/countersign/countersign/executor/store"
)

// sidecar is the policy engine and release service of one sidecar on db.
func sidecar(db *store.DB) (*policy.Engine, *release.Service) {
	pol := policy.New(policy.Options{History: release.History{DB: db}, Timeout: 5 * time.Second}) // a loaded CI machine is slow
	return pol, release.New(db, pol)
}

// variant is release p1 under another revision: the same limits, another
// digest.
func variant(t *testing.T, revision string) *policy.Bundle {
	t.Helper()
	fsys, err := bundles.Variant("p1", revision, func(s string) string { return s }, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := policy.LoadFS(fsys)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestActivationAgainstASupersededBundleIsRefused: two sidecars share a
// store. One activates a bundle while the other's gate has compared its
// candidate with the bundle that was active before; the other's
// activation is refused, leaving the store and its own policy as they
// were, and offered again it is checked against the bundle in force.
func TestActivationAgainstASupersededBundleIsRefused(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(filepath.Join(t.TempDir(), "state.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	_, a := sidecar(db)
	polB, b := sidecar(db)
	first, second, third := variant(t, "p1-a"), variant(t, "p1-b"), variant(t, "p1-c")

	if _, err := a.ActivateBundle(ctx, first, policy.Activation{By: "ops-ida"}); err != nil {
		t.Fatal(err)
	}
	if err := b.Follow(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.ActivateBundle(ctx, second, policy.Activation{By: "ops-ida"}); err != nil {
		t.Fatal(err)
	}
	// Sidecar b has not followed: its gate compares third with first.
	_, err = polB.Activate(ctx, third, policy.Activation{By: "ops-jo"})
	if !errors.Is(err, release.ErrActiveChanged) {
		t.Fatalf("activating against a superseded bundle: %v, want ErrActiveChanged", err)
	}
	t.Logf("refused: %v", err)
	if got := polB.Active().Digest(); got != first.Digest() {
		t.Errorf("sidecar b's policy holds %s after the refusal, want %s (unchanged)", got, first.Digest())
	}
	history, err := b.History(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(history); n != 2 || history[1].Digest != second.Digest() || history[1].Status != store.BundleActive {
		t.Fatalf("history %+v, want the two activations of sidecar a, the second active", history)
	}

	if _, err := b.ActivateBundle(ctx, third, policy.Activation{By: "ops-jo"}); err != nil {
		t.Fatalf("offered again: %v", err)
	}
	if active, err := a.Active(ctx); err != nil || active.Digest != third.Digest() {
		t.Fatalf("active %s (%v), want %s", active.Digest, err, third.Digest())
	}
}
