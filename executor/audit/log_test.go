package audit_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/countersign/countersign/executor/audit"
	"github.com/countersign/countersign/executor/store"
)

func TestAppendManyInOneUpdate(t *testing.T) {
	db, log, c := setup(t)
	first := mustAppend(t, db, log, refund(0))
	// Fifty records in one transaction at one instant: the ids still
	// increase and each links to the one before, including across the
	// transaction boundary.
	c.Advance(time.Second)
	var recs []audit.Record
	for i := 1; i <= 50; i++ {
		recs = append(recs, refund(i))
	}
	got := append(first, mustAppend(t, db, log, recs...)...)
	for i, r := range got {
		wantPrev := ""
		if i > 0 {
			wantPrev = got[i-1].Hash
			if r.ID <= got[i-1].ID {
				t.Fatalf("record %d: id %s does not sort after %s", i, r.ID, got[i-1].ID)
			}
		}
		if r.Prev != wantPrev {
			t.Fatalf("record %d: prev %q, want %q", i, r.Prev, wantPrev)
		}
		if sum, _ := r.Sum(); sum != r.Hash {
			t.Fatalf("record %d: hash %s, sum %s", i, r.Hash, sum)
		}
		id := ulid.MustParseStrict(r.ID)
		if want := c.Now(); i > 0 && !id.Timestamp().Equal(want) {
			t.Errorf("record %d: id time %v, want the clock's %v", i, id.Timestamp(), want)
		}
	}
	rep, err := audit.Verify(db)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK || rep.Records != 51 || rep.Head != got[50].Hash {
		t.Fatalf("verify = %+v, want ok, 51 records, head %s", rep, got[50].Hash)
	}
}

func TestAppendRollsBackWithItsTransaction(t *testing.T) {
	db, log, _ := setup(t)
	kept := mustAppend(t, db, log, refund(0))
	boom := errors.New("state change failed")
	err := db.Update(func(tx *store.Tx) error {
		if _, err := log.Append(tx, refund(1)); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("update = %v", err)
	}
	next := mustAppend(t, db, log, refund(2))
	if next[0].Prev != kept[0].Hash {
		t.Fatalf("after a rollback the next record links to %q, want %q", next[0].Prev, kept[0].Hash)
	}
	if rep, _ := audit.Verify(db); !rep.OK || rep.Records != 2 {
		t.Fatalf("verify = %+v", rep)
	}
}

func TestIDsIncreaseWhateverTheClock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sidecar.db")
	db := openAt(t, path)
	c := &clock{now: t0}
	log := newLog(c, 1)
	a := mustAppend(t, db, log, refund(0))[0]
	c.Set(t0.Add(-time.Hour)) // the clock goes back
	b := mustAppend(t, db, log, refund(1))[0]
	// A second Log over the same file (another process after a restart)
	// with the same seed and the clock back where it was: its own entropy
	// would repeat the first id.
	c.Set(t0)
	other := newLog(c, 1)
	d := mustAppend(t, db, other, refund(2))[0]
	if !(a.ID < b.ID && b.ID < d.ID) {
		t.Fatalf("ids %s %s %s do not increase", a.ID, b.ID, d.ID)
	}
	if !b.At.Equal(t0.Add(-time.Hour)) {
		t.Errorf("At = %v: the record keeps the clock's reading", b.At)
	}
	if rep, _ := audit.Verify(db); !rep.OK {
		t.Fatalf("verify = %+v", rep)
	}
}

func TestAppendKeepsCallerTimeInUTC(t *testing.T) {
	db, log, _ := setup(t)
	at := time.Date(2026, 11, 29, 10, 30, 0, 123456789, time.FixedZone("CET", 3600))
	r := refund(0)
	r.At = at
	got := mustAppend(t, db, log, r)[0]
	if got.At.Location() != time.UTC || !got.At.Equal(at) {
		t.Fatalf("At = %v, want %v in UTC", got.At, at)
	}
}

func TestAppendRefuses(t *testing.T) {
	tok := fakeJWT()
	for _, tc := range []struct {
		name string
		edit func(*audit.Record)
		want error
	}{
		{"no kind", func(r *audit.Record) { r.Kind = "" }, audit.ErrInvalid},
		{"no actor", func(r *audit.Record) { r.Actor = "" }, audit.ErrInvalid},
		{"args not JSON", func(r *audit.Record) { r.Args = []byte(`{"order":`) }, audit.ErrInvalid},
		{"detail not JSON-able", func(r *audit.Record) { r.Detail = map[string]any{"f": func() {}} }, audit.ErrInvalid},
		{"token in detail", func(r *audit.Record) { r.Detail["token"] = tok }, audit.ErrToken},
		{"bearer header in detail", func(r *audit.Record) { r.Detail["authorization"] = "Bearer " + tok }, audit.ErrToken},
		{"token nested in detail", func(r *audit.Record) {
			r.Detail["request"] = map[string]any{"headers": []any{"x", map[string]any{"v": tok}}}
		}, audit.ErrToken},
		{"token as a detail key", func(r *audit.Record) { r.Detail[tok] = true }, audit.ErrToken},
		{"token in a struct in detail", func(r *audit.Record) {
			r.Detail["call"] = struct{ Token string }{tok}
		}, audit.ErrToken},
		{"token in args", func(r *audit.Record) { r.Args = []byte(`{"order":"O-1","note":"` + tok + `"}`) }, audit.ErrToken},
		{"token as actor", func(r *audit.Record) { r.Actor = tok }, audit.ErrToken},
		{"unsigned token (alg none)", func(r *audit.Record) {
			r.Detail["t"] = strings.Join(strings.Split(tok, ".")[:2], ".") + "."
		}, audit.ErrToken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, log, _ := setup(t)
			r := refund(0)
			tc.edit(&r)
			err := db.Update(func(tx *store.Tx) error { _, err := log.Append(tx, r); return err })
			if !errors.Is(err, tc.want) {
				t.Fatalf("Append = %v, want %v", err, tc.want)
			}
			if strings.Contains(err.Error(), strings.Split(tok, ".")[0]) {
				t.Fatalf("the error repeats the token: %v", err)
			}
			if rep, _ := audit.Verify(db); rep.Records != 0 {
				t.Fatalf("a refused record was stored: %+v", rep)
			}
		})
	}
}

func TestAppendAcceptsLookalikes(t *testing.T) {
	db, log, _ := setup(t)
	r := refund(0)
	// Dotted and base64url-shaped values that are not tokens: no JSON
	// header in any segment.
	r.Detail = map[string]any{
		"version":   "1.22.3",
		"host":      "ledger.internal.example",
		"jti":       "01JD5Z8Q7R3M2K9X4V6B1N0C8T",
		"kid":       "epoch-3",
		"call_hash": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		"b64":       "aGVsbG8.d29ybGQ.Zm9vYmFy",
		"bearer":    "Bearer opaque-session-id.not.a.jwt",
	}
	mustAppend(t, db, log, r)
}

func TestAppendNormalizes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sidecar.db")
	db := openAt(t, path)
	log := newLog(&clock{now: t0}, 1)
	r := refund(0)
	r.Args = []byte(` { "order" : "O-1001", "amount" : 3000 } `)
	r.Detail = map[string]any{
		"big":    int64(9007199254740993), // 2^53+1: float64 would round it
		"struct": struct{ Cents int64 }{12050},
		"empty":  map[string]any{},
		"html":   "<a&b>",
	}
	got := mustAppend(t, db, log, r)[0]
	if string(got.Args) != `{"amount":3000,"order":"O-1001"}` {
		t.Errorf("args = %s, want the canonical form", got.Args)
	}
	page, err := log.List(db, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	back, _ := json.Marshal(page.Records[0].Detail)
	if want := `{"big":9007199254740993,"empty":{},"html":"\u003ca\u0026b\u003e","struct":{"Cents":12050}}`; string(back) != want {
		t.Errorf("detail after the store = %s, want %s", back, want)
	}
	if sum, _ := page.Records[0].Sum(); sum != got.Hash {
		t.Errorf("the stored record's hash does not recompute")
	}
	if rep, _ := audit.Verify(db); !rep.OK {
		t.Fatalf("verify = %+v", rep)
	}
}

func TestAppendInReadTransactionFails(t *testing.T) {
	db, log, _ := setup(t)
	err := db.View(func(tx *store.Tx) error { _, err := log.Append(tx, refund(0)); return err })
	if err == nil {
		t.Fatal("Append in View succeeded")
	}
}

// Writers in many goroutines, each in its own Update, with readers listing
// and verifying alongside: the chain comes out whole, one record per append.
func TestConcurrentAppends(t *testing.T) {
	db, log, c := setup(t)
	const writers, each = 8, 25
	var wg sync.WaitGroup
	done := make(chan struct{})
	errs := make(chan error, writers+2)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				c.Advance(time.Duration(i%3) * time.Millisecond / 2) // often the same millisecond
				r := refund(w*each + i)
				r.Actor = fmt.Sprintf("rep-%d", w)
				if err := db.Update(func(tx *store.Tx) error { _, err := log.Append(tx, r); return err }); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var readers sync.WaitGroup
	for range 2 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				rep, err := audit.Verify(db)
				if err != nil || !rep.OK {
					errs <- fmt.Errorf("verify during writes: %+v, %v", rep, err)
					return
				}
				if _, err := log.List(db, "", 10); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(done)
	readers.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	rep, err := audit.Verify(db)
	if err != nil || !rep.OK || rep.Records != writers*each {
		t.Fatalf("verify = %+v, %v; want ok with %d records", rep, err, writers*each)
	}
}

func TestListPages(t *testing.T) {
	db, log, c := setup(t)
	var all []audit.Record
	for i := range 25 {
		c.Advance(time.Second)
		all = append(all, mustAppend(t, db, log, refund(i))...)
	}
	var got []audit.Record
	after, pages := "", 0
	for {
		p, err := log.List(db, after, 10)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		got = append(got, p.Records...)
		if p.Next == "" {
			break
		}
		if p.Next != p.Records[len(p.Records)-1].ID {
			t.Fatalf("next %s is not the page's last id", p.Next)
		}
		after = p.Next
	}
	if pages != 3 || len(got) != 25 {
		t.Fatalf("%d pages, %d records; want 3 pages of 10, 10, 5", pages, len(got))
	}
	for i := range got {
		if got[i].ID != all[i].ID || got[i].Hash != all[i].Hash {
			t.Fatalf("record %d: listed %s, appended %s", i, got[i].ID, all[i].ID)
		}
	}
	// An exact fit ends without a dangling empty page.
	if p, _ := log.List(db, all[14].ID, 10); len(p.Records) != 10 || p.Next != "" {
		t.Errorf("last full page: %d records, next %q", len(p.Records), p.Next)
	}
	if p, _ := log.List(db, all[24].ID, 10); len(p.Records) != 0 || p.Records == nil {
		t.Errorf("after the last record: %+v, want an empty (not null) page", p)
	}
	if p, _ := log.List(db, "", 0); len(p.Records) != 25 {
		t.Errorf("default limit listed %d", len(p.Records))
	}
	if _, err := log.List(db, "W1", 10); !errors.Is(err, audit.ErrCursor) {
		t.Errorf("bad cursor: %v", err)
	}
}

// The cost Append adds to the engine's transaction (NoSync, so the fsync
// that dominates a real commit does not hide it).
func BenchmarkAppend(b *testing.B) {
	db, err := store.Open(filepath.Join(b.TempDir(), "sidecar.db"), store.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	log := newLog(&clock{now: t0}, 1)
	r := refund(0)
	b.ReportAllocs()
	for b.Loop() {
		if err := db.Update(func(tx *store.Tx) error { _, err := log.Append(tx, r); return err }); err != nil {
			b.Fatal(err)
		}
	}
}
