package audit_test

import (
	"encoding/base64"
	"math/rand"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/executor/audit"
	"github.com/countersign/countersign/executor/store"
)

var t0 = time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)

// clock is a simulated clock that moves only when told.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func openAt(t testing.TB, path string) *store.DB {
	t.Helper()
	db, err := store.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func newLog(c *clock, seed int64) *audit.Log {
	return audit.New(audit.Options{Clock: c, Entropy: rand.New(rand.NewSource(seed))})
}

func setup(t testing.TB) (*store.DB, *audit.Log, *clock) {
	t.Helper()
	c := &clock{now: t0}
	return openAt(t, filepath.Join(t.TempDir(), "sidecar.db")), newLog(c, 1), c
}

// refund is the record of a refund decision for order O-<1000+i>, amount
// 3000+i cents: every record differs, so an edit is always a real change.
func refund(i int) audit.Record {
	return audit.Record{
		Kind: audit.KindDecision, Actor: "rep-ana", Workflow: "W1", N: i + 1, Tool: "issue_refund",
		Args:   []byte(`{"amount":` + strconv.Itoa(3000+i) + `,"order":"O-` + strconv.Itoa(1000+i) + `"}`),
		Detail: map[string]any{"decision": "ALLOW", "rule": "R3", "revision": "p1"},
	}
}

func mustAppend(t testing.TB, db *store.DB, l *audit.Log, recs ...audit.Record) []audit.Record {
	t.Helper()
	var out []audit.Record
	err := db.Update(func(tx *store.Tx) error {
		for _, r := range recs {
			got, err := l.Append(tx, r)
			if err != nil {
				return err
			}
			out = append(out, got)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// fakeJWT is shaped like a signed token: it is never verified, only
// recognized.
func fakeJWT() string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"EdDSA","kid":"epoch-1","typ":"JWT"}`)) + "." +
		enc([]byte(`{"sub":"rep-ana","act":{"sub":"agent-1"},"aud":"ledger"}`)) + "." +
		enc([]byte("not-a-real-signature-but-64-bytes-long-enough-to-look-the-part!"))
}
