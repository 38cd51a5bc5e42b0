package store_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/countersign/countersign/executor/store"
)

func TestAuditIsAppendOnly(t *testing.T) {
	eachBackend(t, func(t *testing.T, open opener) {
		db := open(t)
		mustUpdate(t, db, func(tx *store.Tx) error {
			if id, v := tx.LastAudit(); id != nil || v != nil {
				t.Errorf("empty log: last = %q, %q", id, v)
			}
			for _, id := range []string{"b", "c", "d"} {
				if err := tx.AppendAudit([]byte(id), []byte("v"+id)); err != nil {
					return err
				}
			}
			return nil
		})
		for _, tc := range []struct{ name, id string }{
			{"same id (overwrite)", "d"},
			{"before the last (insert)", "c0"},
			{"before the first", "a"},
			{"empty", ""},
		} {
			t.Run(tc.name, func(t *testing.T) {
				err := db.Update(func(tx *store.Tx) error { return tx.AppendAudit([]byte(tc.id), []byte("x")) })
				if !errors.Is(err, store.ErrAuditOrder) {
					t.Fatalf("AppendAudit(%q) = %v, want ErrAuditOrder", tc.id, err)
				}
				err = db.Update(func(tx *store.Tx) error { return tx.AppendAuditAfter([]byte("d"), []byte(tc.id), []byte("x")) })
				if !errors.Is(err, store.ErrAuditOrder) {
					t.Fatalf("AppendAuditAfter(d, %q) = %v, want ErrAuditOrder", tc.id, err)
				}
			})
		}
		err := db.View(func(tx *store.Tx) error {
			id, v := tx.LastAudit()
			if string(id) != "d" || string(v) != "vd" {
				t.Errorf("last = %q, %q; want d, vd", id, v)
			}
			var all, after []string
			if err := tx.EachAudit(func(id, v []byte) error {
				all = append(all, fmt.Sprintf("%s=%s", id, v))
				return nil
			}); err != nil {
				return err
			}
			if err := tx.EachAuditAfter([]byte("b"), func(id, _ []byte) error {
				after = append(after, string(id))
				return nil
			}); err != nil {
				return err
			}
			if fmt.Sprint(all) != "[b=vb c=vc d=vd]" || fmt.Sprint(after) != "[c d]" {
				t.Errorf("EachAudit = %v, EachAuditAfter(b) = %v", all, after)
			}
			// A cursor between two keys starts at the next one.
			var between []string
			_ = tx.EachAuditAfter([]byte("bb"), func(id, _ []byte) error { between = append(between, string(id)); return nil })
			if fmt.Sprint(between) != "[c d]" {
				t.Errorf("EachAuditAfter(bb) = %v", between)
			}
			stop := errors.New("stop")
			n := 0
			if err := tx.EachAudit(func(_, _ []byte) error { n++; return stop }); err != stop || n != 1 {
				t.Errorf("early stop: err %v after %d records", err, n)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}

func TestAuditNotWritableInView(t *testing.T) {
	eachBackend(t, func(t *testing.T, open opener) {
		db := open(t)
		err := db.View(func(tx *store.Tx) error { return tx.AppendAudit([]byte("a"), nil) })
		if err == nil {
			t.Fatal("AppendAudit in a read transaction succeeded")
		}
	})
}
