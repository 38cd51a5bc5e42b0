package store_test

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

// minute is the time of the i-th decision of the logs below.
func minute(i int) time.Time { return t0.Add(time.Duration(i) * time.Minute) }

// appendDecisions logs one decision per workflow in wfs, the i-th (sequence
// number i+1) made at minute(i).
func appendDecisions(t testing.TB, db *store.DB, wfs ...string) {
	t.Helper()
	mustUpdate(t, db, func(tx *store.Tx) error {
		for i, wf := range wfs {
			d := store.Decision{ID: fmt.Sprintf("d-%d", i+1), At: minute(i), Workflow: wf, N: i + 1,
				Path: "countersign/call/decision", Input: json.RawMessage(`{"tool":"lookup_order"}`)}
			if _, err := tx.AppendDecision(d); err != nil {
				return err
			}
		}
		return nil
	})
}

func seqs(ds []store.Decision) []uint64 {
	out := []uint64{}
	for _, d := range ds {
		out = append(out, d.Seq)
	}
	return out
}

func TestDecisionPage(t *testing.T) {
	eachBackend(t, func(t *testing.T, open opener) {
		db := open(t)
		// Sequence numbers 1 to 10, made at minutes 0 to 9.
		appendDecisions(t, db, "W1", "W2", "W10", "W1", "W2", "W1", "W1", "W2", "W10", "W1")
		for _, tc := range []struct {
			name  string
			f     store.DecisionFilter
			limit int
			want  []uint64
			next  uint64
		}{
			{"the first page names where the next begins", store.DecisionFilter{}, 4, []uint64{1, 2, 3, 4}, 4},
			{"a page after a cursor", store.DecisionFilter{After: 4}, 4, []uint64{5, 6, 7, 8}, 8},
			{"the last page has no next", store.DecisionFilter{After: 8}, 4, []uint64{9, 10}, 0},
			{"a page that ends with the log has no next", store.DecisionFilter{After: 6}, 4, []uint64{7, 8, 9, 10}, 0},
			{"a cursor past the end is an empty page", store.DecisionFilter{After: 99}, 4, []uint64{}, 0},
			{"the last cursor there can be does not wrap to the start", store.DecisionFilter{After: math.MaxUint64}, 4, []uint64{}, 0},
			{"one workflow, not another whose id it prefixes", store.DecisionFilter{Workflow: "W1"}, 10, []uint64{1, 4, 6, 7, 10}, 0},
			{"one workflow, a page at a time", store.DecisionFilter{Workflow: "W1", After: 4}, 2, []uint64{6, 7}, 7},
			{"an unknown workflow", store.DecisionFilter{Workflow: "W3"}, 10, []uint64{}, 0},
			{"since is inclusive", store.DecisionFilter{Since: minute(5)}, 10, []uint64{6, 7, 8, 9, 10}, 0},
			{"since between two decisions", store.DecisionFilter{Since: minute(5).Add(time.Second)}, 10, []uint64{7, 8, 9, 10}, 0},
			{"since before the log", store.DecisionFilter{Since: minute(-60)}, 3, []uint64{1, 2, 3}, 3},
			{"since after the log", store.DecisionFilter{Since: minute(60)}, 10, []uint64{}, 0},
			{"until is exclusive", store.DecisionFilter{Until: minute(3)}, 10, []uint64{1, 2, 3}, 0},
			{"until ends a full page without a next", store.DecisionFilter{Until: minute(3)}, 3, []uint64{1, 2, 3}, 0},
			{"since, until and a workflow", store.DecisionFilter{Workflow: "W2", Since: minute(1), Until: minute(7)}, 10, []uint64{2, 5}, 0},
			{"a cursor inside since and until", store.DecisionFilter{Since: minute(2), Until: minute(8), After: 5}, 2, []uint64{6, 7}, 7},
		} {
			t.Run(tc.name, func(t *testing.T) {
				err := db.View(func(tx *store.Tx) error {
					p, err := tx.DecisionPage(tc.f, tc.limit)
					if err != nil {
						return err
					}
					if got := seqs(p.Decisions); !slices.Equal(got, tc.want) || p.Next != tc.next {
						t.Errorf("page %v next %d, want %v next %d", got, p.Next, tc.want, tc.next)
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			})
		}
	})
}

// Following next_cursor from the first page reads every decision once, in
// order, whatever the page size.
func TestDecisionPagesCoverTheLogOnce(t *testing.T) {
	eachBackend(t, func(t *testing.T, open opener) {
		db := open(t)
		wfs := make([]string, 23)
		for i := range wfs {
			wfs[i] = fmt.Sprintf("W%d", i%4)
		}
		appendDecisions(t, db, wfs...)
		for _, limit := range []int{1, 5, 23, 100} {
			var got []uint64
			f := store.DecisionFilter{}
			for pages := 0; ; pages++ {
				if pages > 23 {
					t.Fatalf("limit %d: more pages than decisions", limit)
				}
				var p store.DecisionPage
				if err := db.View(func(tx *store.Tx) (err error) { p, err = tx.DecisionPage(f, limit); return err }); err != nil {
					t.Fatal(err)
				}
				got = append(got, seqs(p.Decisions)...)
				if p.Next == 0 {
					break
				}
				f.After = p.Next
			}
			want := make([]uint64, 23)
			for i := range want {
				want[i] = uint64(i + 1)
			}
			if !slices.Equal(got, want) {
				t.Errorf("limit %d: read %v", limit, got)
			}
		}
	})
}

func TestDecisionPageRefusesAnEmptyPage(t *testing.T) {
	eachBackend(t, func(t *testing.T, open opener) {
		db := open(t)
		err := db.View(func(tx *store.Tx) error { _, err := tx.DecisionPage(store.DecisionFilter{}, 0); return err })
		if err == nil || !strings.Contains(err.Error(), "at least 1") {
			t.Fatalf("limit 0: %v, want a refusal", err)
		}
	})
}

// A page seeks to its start: the decisions before a cursor, before since
// and of other workflows are never decoded. They are made unreadable here
// (only their time is left intact, which the search for since reads), and
// the pages that must not read them still succeed; a page that does read
// one fails, which shows the test can tell.
func TestDecisionPageSeeksInsteadOfScanning(t *testing.T) {
	eachBackend(t, func(t *testing.T, open opener) {
		db := open(t)
		const n = 1000
		wfs := make([]string, n)
		for i := range wfs {
			wfs[i] = "W-other"
			if i >= n-10 {
				wfs[i] = "W-last"
			}
		}
		appendDecisions(t, db, wfs...)
		// Every decision but the last ten is unreadable.
		mustUpdate(t, db, func(tx *store.Tx) error {
			for i := range n - 10 {
				raw := fmt.Sprintf(`{"at": %q, "n": "unreadable"}`, minute(i).Format(time.RFC3339Nano))
				if err := tx.OverwriteDecision(uint64(i+1), []byte(raw)); err != nil {
					return err
				}
			}
			return nil
		})
		for _, tc := range []struct {
			name string
			f    store.DecisionFilter
			ok   bool
		}{
			{"after a cursor", store.DecisionFilter{After: n - 10}, true},
			{"since", store.DecisionFilter{Since: minute(n - 10)}, true},
			{"one workflow", store.DecisionFilter{Workflow: "W-last"}, true},
			{"from the start, which must read them", store.DecisionFilter{}, false},
		} {
			t.Run(tc.name, func(t *testing.T) {
				var p store.DecisionPage
				err := db.View(func(tx *store.Tx) (err error) { p, err = tx.DecisionPage(tc.f, 100); return err })
				switch {
				case tc.ok && err != nil:
					t.Fatalf("page: %v (it read a decision it skips)", err)
				case tc.ok && (len(p.Decisions) != 10 || p.Decisions[0].Seq != n-9):
					t.Errorf("page %v, want the last ten", seqs(p.Decisions))
				case !tc.ok && err == nil:
					t.Errorf("a page over unreadable decisions succeeded")
				}
			})
		}
	})
}

// A decision logged before the log took OPA's shape reads as it was, with
// no id, path, input or digest.
func TestOldDecisionRecordsStillRead(t *testing.T) {
	eachBackend(t, func(t *testing.T, open opener) {
		db := open(t)
		appendDecisions(t, db, "W1")
		old := `{"seq":1,"at":"2026-11-29T09:00:00Z","workflow":"W1","n":1,"user":"rep-ana","tool":"issue_refund",` +
			`"args":{"order":"O-1001","amount":3000},"decision":"ALLOW","rule":"default-allow-after-checks","revision":"p1"}`
		mustUpdate(t, db, func(tx *store.Tx) error { return tx.OverwriteDecision(1, []byte(old)) })
		var got []store.Decision
		db.View(func(tx *store.Tx) (err error) { got, err = tx.Decisions("W1"); return err })
		want := store.Decision{Seq: 1, At: t0, Workflow: "W1", N: 1, User: "rep-ana", Tool: tool.IssueRefund,
			Args: tool.Args{Order: "O-1001", Amount: 3000}, Decision: "ALLOW", Rule: "default-allow-after-checks", Revision: "p1"}
		if len(got) != 1 || !reflect.DeepEqual(got[0], want) {
			t.Fatalf("read %+v, want %+v", got, want)
		}
	})
}

func TestLastDecisions(t *testing.T) {
	eachBackend(t, func(t *testing.T, open opener) {
		db := open(t)
		appendDecisions(t, db, "W1", "W2", "W3", "W4", "W5")
		for _, tc := range []struct {
			n    int
			want []uint64
		}{
			{0, []uint64{}},
			{2, []uint64{4, 5}},
			{5, []uint64{1, 2, 3, 4, 5}},
			{10000, []uint64{1, 2, 3, 4, 5}},
		} {
			var got []store.Decision
			if err := db.View(func(tx *store.Tx) (err error) { got, err = tx.LastDecisions(tc.n); return err }); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(seqs(got), tc.want) {
				t.Errorf("LastDecisions(%d) = %v, want %v", tc.n, seqs(got), tc.want)
			}
		}
		if got := decisionsOf(t, db); got[2].ID != "d-3" || string(got[2].Input) != `{"tool":"lookup_order"}` {
			t.Errorf("decision 3 = %+v: the new fields did not survive", got[2])
		}
	})
}

func decisionsOf(t *testing.T, db *store.DB) []store.Decision {
	t.Helper()
	var out []store.Decision
	if err := db.View(func(tx *store.Tx) (err error) { out, err = tx.Decisions(""); return err }); err != nil {
		t.Fatal(err)
	}
	return out
}

// BenchmarkDecisionPage reads the last page of a log by its cursor, by
// since and by workflow: with -bench, the cost stays flat as the log grows
// a hundredfold, because the page seeks to its start.
func BenchmarkDecisionPage(b *testing.B) {
	for _, size := range []int{1000, 100000} {
		db, err := store.Open(filepath.Join(b.TempDir(), "s.db"), store.Options{NoSync: true})
		if err != nil {
			b.Fatal(err)
		}
		wfs := make([]string, size)
		for i := range wfs {
			wfs[i] = fmt.Sprintf("W%d", i%50)
		}
		appendDecisions(b, db, wfs...)
		for _, f := range []struct {
			name string
			f    store.DecisionFilter
		}{
			{"cursor", store.DecisionFilter{After: uint64(size - 100)}},
			{"since", store.DecisionFilter{Since: minute(size - 100)}},
			{"workflow", store.DecisionFilter{Workflow: "W7", After: uint64(size - 100)}},
		} {
			b.Run(fmt.Sprintf("log=%d/%s", size, f.name), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if err := db.View(func(tx *store.Tx) error { _, err := tx.DecisionPage(f.f, 100); return err }); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		db.Close()
	}
}
