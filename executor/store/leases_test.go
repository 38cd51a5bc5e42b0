package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/countersign/countersign/executor/store"
)

// A lease is deleted only by the taking that wrote it, and only expired
// leases are listed for takeover.
func TestLeases(t *testing.T) {
	eachBackend(t, func(t *testing.T, open opener) {
		db := open(t)
		mustUpdate(t, db, func(tx *store.Tx) error {
			if err := tx.PutLease(store.Lease{Workflow: "W1", Holder: "a", Token: "t1", Expires: t0}); err != nil {
				return err
			}
			return tx.PutLease(store.Lease{Workflow: "W2", Holder: "b", Token: "t2", Expires: t0.Add(time.Minute)})
		})
		db.View(func(tx *store.Tx) error {
			got, err := tx.ExpiredLeases(t0.Add(time.Second))
			if err != nil || len(got) != 1 || got[0].Workflow != "W1" || got[0].Holder != "a" {
				t.Errorf("expired = %+v %v, want W1 alone", got, err)
			}
			return nil
		})
		mustUpdate(t, db, func(tx *store.Tx) error {
			if err := tx.PutLease(store.Lease{Workflow: "W1", Holder: "a", Token: "t3", Expires: t0}); err != nil {
				return err
			}
			if err := tx.DeleteLease("W1", "t1"); err != nil { // an old taking's release
				return err
			}
			return tx.DeleteLease("W2", "t2")
		})
		db.View(func(tx *store.Tx) error {
			if l, err := tx.Lease("W1"); err != nil || l.Token != "t3" {
				t.Errorf("W1 = %+v %v, want the newer taking t3 kept", l, err)
			}
			if _, err := tx.Lease("W2"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("W2 after its release: %v, want ErrNotFound", err)
			}
			return nil
		})
	})
}

// Every taking gets a larger fencing number, even after the lease was
// deleted; a write checked against a fence fails with ErrFenced, and
// commits nothing, once the lease was taken over, deleted or parked.
func TestLeaseFencing(t *testing.T) {
	eachBackend(t, func(t *testing.T, open opener) {
		db := open(t)
		take := func(holder, token string) uint64 {
			t.Helper()
			var fence uint64
			mustUpdate(t, db, func(tx *store.Tx) (err error) {
				if fence, err = tx.NextFence(); err != nil {
					return err
				}
				return tx.PutLease(store.Lease{Workflow: "W1", Holder: holder, Token: token, Fence: fence, Expires: t0})
			})
			return fence
		}
		// write puts a workflow under the check of fence, as a step write does.
		write := func(fence uint64) error {
			return db.Update(func(tx *store.Tx) error {
				if err := tx.CheckFence("W1", fence); err != nil {
					return err
				}
				return tx.CreateWorkflow(store.Workflow{ID: "W1", User: "rep-ana", Status: store.WorkflowRunning})
			})
		}
		a := take("a", "t1")
		mustUpdate(t, db, func(tx *store.Tx) error { return tx.DeleteLease("W1", "t1") })
		b := take("b", "t2")
		if b <= a {
			t.Fatalf("fences %d then %d: a taking after a deletion must get a larger one", a, b)
		}
		if err := write(a); !errors.Is(err, store.ErrFenced) {
			t.Fatalf("a write under the old fence: %v, want ErrFenced", err)
		}
		db.View(func(tx *store.Tx) error {
			if _, err := tx.Workflow("W1"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("the fenced write committed something: %v", err)
			}
			return nil
		})
		if err := write(b); err != nil {
			t.Fatalf("a write under the holder's fence: %v", err)
		}
		// A renewal keeps the fence; parking drops it.
		mustUpdate(t, db, func(tx *store.Tx) error {
			return tx.PutLease(store.Lease{Workflow: "W1", Holder: "b", Token: "t2", Fence: b, Expires: t0.Add(time.Minute)})
		})
		mustUpdate(t, db, func(tx *store.Tx) error { return tx.CheckFence("W1", b) })
		mustUpdate(t, db, func(tx *store.Tx) error { return tx.ParkLease("W1", "t2", t0.Add(time.Hour)) })
		if err := db.Update(func(tx *store.Tx) error { return tx.CheckFence("W1", b) }); !errors.Is(err, store.ErrFenced) {
			t.Fatalf("a write after the lease was parked: %v, want ErrFenced", err)
		}
		db.View(func(tx *store.Tx) error {
			l, err := tx.Lease("W1")
			if err != nil || !l.Parked() || l.Fence != b || !l.Expires.Equal(t0.Add(time.Hour)) {
				t.Errorf("parked lease %+v %v", l, err)
			}
			if got, err := tx.ExpiredLeases(t0.Add(time.Hour)); err != nil || len(got) != 1 || !got[0].Parked() {
				t.Errorf("expired at the end of the wait: %+v %v, want the parked lease", got, err)
			}
			return nil
		})
		if c := take("c", "t3"); c <= b {
			t.Fatalf("fence %d after %d", c, b)
		}
	})
}

// A lease taken over at REPEATABLE READ (UpdateRows) while a write checked
// against the old fence is under way: that write fails with ErrFenced, even
// though its snapshot, taken before the takeover, still shows the old
// fence; and when the check was sent first, the takeover waits for the
// write's commit. Either way no write under the old fence commits after the
// takeover did.
func TestTakeoverAtRepeatableReadFencesAWriteUnderWay(t *testing.T) {
	open := backends[1].place(t) // PostgreSQL: on bbolt the writer is alone
	db := open(t)
	takeover := func(fence uint64) error {
		return db.UpdateRows(func(tx *store.Tx) error {
			return tx.PutLease(store.Lease{Workflow: "W1", Holder: "b", Token: "t2", Fence: fence, Expires: t0.Add(time.Minute)})
		})
	}
	if err := takeover(5); err != nil {
		t.Fatal(err)
	}
	mustUpdate(t, db, func(tx *store.Tx) error { return tx.CreateWorkflow(store.Workflow{ID: "W1", User: "rep-ana"}) })

	// The takeover commits after the write's snapshot, before its check.
	runs := 0
	err := db.Update(func(tx *store.Tx) error {
		runs++
		if _, err := tx.Workflow("W1"); err != nil { // the snapshot
			return err
		}
		if runs == 1 {
			if err := takeover(6); err != nil {
				return err
			}
		}
		if err := tx.CheckFence("W1", 5); err != nil {
			return err
		}
		return tx.PutStep(refund("W1", 1, "O-1", 500, store.StepStarted, t0))
	})
	if !errors.Is(err, store.ErrFenced) {
		t.Fatalf("a write under fence 5 after a takeover to 6 in its snapshot's lifetime: %v (runs %d), want ErrFenced", err, runs)
	}

	// The check is sent (with a read) before the takeover starts: the
	// takeover cannot finish until the write has committed. The write
	// gives it half a second to (wrongly) finish first.
	type outcome struct {
		err          error
		writeVisible bool
	}
	done := make(chan outcome, 1)
	runs = 0
	var early *outcome
	err = db.Update(func(tx *store.Tx) error {
		runs++
		if err := tx.CheckFence("W1", 6); err != nil {
			return err
		}
		if _, err := tx.Workflow("W1"); err != nil { // sends the check, which locks the fence row
			return err
		}
		if runs == 1 {
			go func() {
				var o outcome
				if o.err = takeover(7); o.err == nil {
					o.err = db.View(func(tx *store.Tx) error { _, err := tx.Step("W1", 1); o.writeVisible = err == nil; return nil })
				}
				done <- o
			}()
			select {
			case o := <-done:
				early = &o
			case <-time.After(500 * time.Millisecond):
			}
		}
		return tx.PutStep(refund("W1", 1, "O-1", 500, store.StepStarted, t0))
	})
	if err != nil {
		t.Fatalf("the write under fence 6, checked before the takeover: %v", err)
	}
	o := early
	if o == nil {
		got := <-done
		o = &got
	}
	if o.err != nil || !o.writeVisible || runs != 1 {
		t.Errorf("the takeover ended (%v) with the fenced write not yet committed (visible %v, runs %d)", o.err, o.writeVisible, runs)
	}
}
