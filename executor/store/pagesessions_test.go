package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/countersign/countersign/executor/store"
)

// A page session is read back as written, deleted by its key (twice is no
// error), and the sweep deletes exactly the sessions past their expiry.
func TestPageSessions(t *testing.T) {
	eachBackend(t, func(t *testing.T, open opener) {
		db := open(t)
		live := store.PageSession{SealedToken: []byte{1, 2, 3}, CSRF: "c1", Expires: t0.Add(time.Hour), Notice: "Approved."}
		mustUpdate(t, db, func(tx *store.Tx) error {
			if err := tx.PutPageSession([]byte("live"), live); err != nil {
				return err
			}
			if err := tx.PutPageSession([]byte("ended"), store.PageSession{CSRF: "c2", Expires: t0}); err != nil {
				return err
			}
			return tx.PutPageSession([]byte("gone"), store.PageSession{CSRF: "c3", Expires: t0.Add(time.Hour)})
		})
		mustUpdate(t, db, func(tx *store.Tx) error {
			if err := tx.DeletePageSession([]byte("gone")); err != nil {
				return err
			}
			if err := tx.DeletePageSession([]byte("gone")); err != nil {
				return err
			}
			n, err := tx.DeleteExpiredPageSessions(t0.Add(time.Second))
			if err == nil && n != 1 {
				t.Errorf("swept %d sessions, want 1 (the one past its expiry)", n)
			}
			return err
		})
		db.View(func(tx *store.Tx) error {
			got, err := tx.PageSession([]byte("live"))
			if err != nil || string(got.SealedToken) != string(live.SealedToken) || got.CSRF != "c1" ||
				!got.Expires.Equal(live.Expires) || got.Notice != "Approved." {
				t.Errorf("live = %+v %v, want %+v", got, err, live)
			}
			for _, k := range []string{"ended", "gone"} {
				if _, err := tx.PageSession([]byte(k)); !errors.Is(err, store.ErrNotFound) {
					t.Errorf("%s: %v, want ErrNotFound", k, err)
				}
			}
			return nil
		})
	})
}
