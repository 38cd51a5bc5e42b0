package release_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/bundles"
	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/pgtest"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/release"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// withAuto is release p1 under another revision with refund_auto set to
// cents: its archive and digest.
func withAuto(t *testing.T, revision string, cents int64) ([]byte, string) {
	t.Helper()
	p1, err := bundles.Open("p1")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := fs.ReadFile(p1, "data.json")
	if err != nil {
		t.Fatal(err)
	}
	var data map[string]map[string]map[string]any
	if err := json.Unmarshal(raw, &data); err != nil {
		t.Fatal(err)
	}
	data["countersign"]["limits"]["refund_auto"] = cents
	raw, err = json.Marshal(data)
	if err != nil {
		t.Fatal(err)
	}
	fsys, err := bundles.Variant("p1", revision, func(s string) string { return s }, map[string]string{"data.json": string(raw)})
	if err != nil {
		t.Fatal(err)
	}
	archive, err := policy.Build(fsys)
	if err != nil {
		t.Fatal(err)
	}
	return archive, digest(archive)
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func embedded(t *testing.T, name string) ([]byte, string) {
	t.Helper()
	b, err := bundles.Archive(name)
	if err != nil {
		t.Fatal(err)
	}
	return b, digest(b)
}

// Each refund is held to the auto limit of the bundle whose decision let
// it run, when the gate vouched for that bundle; otherwise to the
// strictest auto limit known, with the reason.
// On bbolt and on PostgreSQL, which a fleet shares.
func TestLimitsHoldEachRefundToItsBundle(t *testing.T) {
	t.Run("bbolt", func(t *testing.T) {
		db, err := store.Open(filepath.Join(t.TempDir(), "state.db"), store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		testLimits(t, db)
	})
	t.Run("postgres", func(t *testing.T) {
		db, err := store.OpenPostgres(context.Background(), pgtest.URL(t), store.PostgresOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		testLimits(t, db)
	})
}

func testLimits(t *testing.T, db *store.DB) {
	p1, p1d := embedded(t, "p1")
	p2, p2d := embedded(t, "p2")
	raised, raisedD := withAuto(t, "p1-raised", 7500)
	lowered, loweredD := withAuto(t, "p1-lowered", 3000)
	refused, refusedD := withAuto(t, "p1-refused", 1000)
	_, lostD := withAuto(t, "p1-lost", 6000)
	at := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	history := []struct {
		rec  store.BundleRecord
		blob []byte
	}{
		{store.BundleRecord{Revision: "p1", Digest: p1d, Status: store.BundleActive, By: "serve"}, p1},
		{store.BundleRecord{Revision: "p1-refused", Digest: refusedD, Status: store.BundleRejected, By: "ops-ida"}, refused},
		{store.BundleRecord{Revision: "p1-raised", Digest: raisedD, Status: store.BundleActive, By: "ops-jon", Proposer: "ops-ida"}, raised},
		{store.BundleRecord{Revision: "p2", Digest: p2d, Status: store.BundleActive, By: "ops-jon", Proposer: "ops-ida", BreakGlass: true, Reason: "incident"}, p2},
		{store.BundleRecord{Revision: "p1-lost", Digest: lostD, Status: store.BundleActive, By: "ops-ida"}, nil}, // its bytes were never kept
		{store.BundleRecord{Revision: "p1", Digest: p1d, Status: store.BundleActive, By: "ops-ida", Rollback: true}, nil},
	}
	steps := []struct {
		n        int
		decision string
		rev, dig string
		shadow   bool
	}{
		{1, "REQUIRE_APPROVAL", "p1", p1d, false},
		{1, "ALLOW", "p1-raised", raisedD, false}, // the decision that let step 1 run
		{2, "ALLOW", "p2", p2d, false},
		{3, "ALLOW", "p1", "", false}, // the bundle changed while it was decided
		{4, "ALLOW", "p1-raised", raisedD, false},
		{4, "ALLOW", "p2", p2d, true}, // shadow: nothing ran
	}
	err := db.Update(func(tx *store.Tx) error {
		for _, h := range history {
			h.rec.At = at
			if _, err := tx.AppendBundle(h.rec, h.blob); err != nil {
				return err
			}
		}
		for _, s := range steps {
			if _, err := tx.AppendDecision(store.Decision{At: at, Workflow: "W1", N: s.n, Tool: tool.IssueRefund,
				Args: tool.Args{Order: "O-1002", Amount: 7000}, Decision: s.decision, Revision: s.rev, Digest: s.dig, Shadow: s.shadow}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	limits := release.NewLimits()
	type want struct {
		auto     money.Cents
		revision string
		fallback string // a word of the reason; "" for the bundle's own limit
	}
	check := func(t *testing.T, name string, got release.Held, w want) {
		t.Helper()
		if got.RefundAuto != w.auto || got.Revision != w.revision || (w.fallback == "") != (got.Fallback == "") || !strings.Contains(got.Fallback, w.fallback) {
			t.Errorf("%s: %+v, want refund_auto %s, revision %q, fallback containing %q", name, got, w.auto, w.revision, w.fallback)
		}
	}
	err = db.View(func(tx *store.Tx) error {
		book, err := limits.Read(tx)
		if err != nil {
			return err
		}
		// A rejected bundle never decided anything; the lost one cannot be
		// read: neither counts among the limits known.
		if book.Strictest() != 5000 {
			t.Errorf("Strictest() = %s, want p1's $50.00", book.Strictest())
		}
		for name, tc := range map[string]struct {
			digest string
			want   want
		}{
			"a bundle two operators put in force":     {raisedD, want{7500, "p1-raised", ""}},
			"the baseline release":                    {p1d, want{5000, "p1", ""}},
			"a bundle released by breaking the glass": {p2d, want{5000, "p2", "breaking the glass"}},
			"a bundle whose bytes are gone":           {lostD, want{5000, "p1-lost", "cannot be read"}},
			"a bundle the gate refused":               {refusedD, want{5000, "", "never went live"}},
			"a digest the history does not hold":      {strings.Repeat("ab", 32), want{5000, "", "never went live"}},
			"no digest":                               {"", want{5000, "", "names no bundle"}},
		} {
			check(t, name, book.Of(tc.digest), tc.want)
		}
		for n, w := range map[int]want{
			1: {7500, "p1-raised", ""},            // the last decision, not the first
			2: {5000, "p2", "breaking the glass"}, // p2's own $5,000.00 is not trusted
			3: {5000, "p1", "names no bundle"},    // the revision the log names, held strictly
			4: {7500, "p1-raised", ""},            // a shadow decision after it ran nothing
			5: {5000, "", "holds no decision"},    // no decision at all
		} {
			h, err := book.Step(tx, "W1", n)
			if err != nil {
				return err
			}
			check(t, fmt.Sprintf("step %d", n), h, w)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// A bundle's own limit is held against a lower designed one; a
	// fallback takes the stricter of the two.
	own := release.Held{RefundAuto: 7500, Revision: "p1-raised"}
	fallback := release.Held{RefundAuto: 5000, Fallback: "why"}
	if own.Limit(4000) != 7500 || fallback.Limit(4000) != 4000 || fallback.Limit(6000) != 5000 || fallback.Limit(0) != 5000 {
		t.Errorf("Limit: own %s, fallback %s %s %s", own.Limit(4000), fallback.Limit(4000), fallback.Limit(6000), fallback.Limit(0))
	}

	// A stricter bundle put in force lowers the strictest known; the
	// raised bundle released again by breaking the glass is no longer
	// vouched for, even for what it decided before.
	err = db.Update(func(tx *store.Tx) error {
		if _, err := tx.AppendBundle(store.BundleRecord{Revision: "p1-lowered", Digest: loweredD, Status: store.BundleActive, By: "ops-ida", At: at}, lowered); err != nil {
			return err
		}
		_, err := tx.AppendBundle(store.BundleRecord{Revision: "p1-raised", Digest: raisedD, Status: store.BundleActive,
			By: "ops-jon", Proposer: "ops-ida", BreakGlass: true, Reason: "again", At: at}, nil)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	err = db.View(func(tx *store.Tx) error {
		book, err := limits.Read(tx)
		if err != nil {
			return err
		}
		if book.Strictest() != 3000 {
			t.Errorf("Strictest() = %s, want p1-lowered's $30.00", book.Strictest())
		}
		check(t, "the raised bundle after a break-glass release of it", book.Of(raisedD), want{3000, "p1-raised", "breaking the glass"})
		check(t, "the lowered bundle", book.Of(loweredD), want{3000, "p1-lowered", ""})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
