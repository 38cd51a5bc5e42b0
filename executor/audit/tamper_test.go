package audit_test

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/countersign/countersign/executor/audit"
)

// buildLog writes a log of n records into a store file, closes it and
// returns the path with the records as appended.
func buildLog(t *testing.T, n int) (string, []audit.Record) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sidecar.db")
	db := openAt(t, path)
	c := &clock{now: t0}
	log := newLog(c, 7)
	var recs []audit.Record
	for i := range n {
		c.Advance(90 * time.Second)
		recs = append(recs, mustAppend(t, db, log, refund(i))...)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return path, recs
}

func copyFile(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "sidecar.db")
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return dst
}

// tamper edits the audit bucket of the file at path with bbolt directly,
// as someone with the file (and no key) could.
func tamper(t *testing.T, path string, fn func(b *bolt.Bucket) error) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(func(tx *bolt.Tx) error { return fn(tx.Bucket([]byte("audit"))) }); err != nil {
		t.Fatal(err)
	}
}

func key(r audit.Record) []byte { return []byte(r.ID) }

// reseal recomputes a tampered record's own hash, as a forger who knows the
// formula would.
func reseal(t *testing.T, value []byte) []byte {
	t.Helper()
	r, err := audit.Decode(value)
	if err != nil {
		t.Fatal(err)
	}
	if r.Hash, err = r.Sum(); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestVerifyFindsTheFirstBrokenLink(t *testing.T) {
	const n = 20
	orig, recs := buildLog(t, n)
	get := func(b *bolt.Bucket, i int) []byte { return bytes.Clone(b.Get(key(recs[i]))) }

	for _, tc := range []struct {
		name      string
		edit      func(t *testing.T, b *bolt.Bucket) error
		index     int
		id        string
		reason    string
		wantCount int
	}{
		{
			name: "edit an amount in the args of record 7",
			edit: func(t *testing.T, b *bolt.Bucket) error {
				v := get(b, 7)
				ed := bytes.Replace(v, []byte(`"amount":3007`), []byte(`"amount":30070`), 1)
				if bytes.Equal(v, ed) {
					t.Fatal("the edit changed nothing")
				}
				return b.Put(key(recs[7]), ed)
			},
			index: 7, id: recs[7].ID, reason: audit.ReasonHash, wantCount: n,
		},
		{
			name:  "delete record 5",
			edit:  func(t *testing.T, b *bolt.Bucket) error { return b.Delete(key(recs[5])) },
			index: 5, id: recs[6].ID, reason: audit.ReasonPrev, wantCount: n - 1,
		},
		{
			name:  "delete the first record",
			edit:  func(t *testing.T, b *bolt.Bucket) error { return b.Delete(key(recs[0])) },
			index: 0, id: recs[1].ID, reason: audit.ReasonPrev, wantCount: n - 1,
		},
		{
			name: "swap the values of records 3 and 12 (reorder)",
			edit: func(t *testing.T, b *bolt.Bucket) error {
				v3, v12 := get(b, 3), get(b, 12)
				if err := b.Put(key(recs[3]), v12); err != nil {
					return err
				}
				return b.Put(key(recs[12]), v3)
			},
			index: 3, id: recs[3].ID, reason: audit.ReasonPrev, wantCount: n,
		},
		{
			name: "swap two neighbours, 10 and 11",
			edit: func(t *testing.T, b *bolt.Bucket) error {
				v10, v11 := get(b, 10), get(b, 11)
				if err := b.Put(key(recs[10]), v11); err != nil {
					return err
				}
				return b.Put(key(recs[11]), v10)
			},
			index: 10, id: recs[10].ID, reason: audit.ReasonPrev, wantCount: n,
		},
		{
			name: "edit record 9 and recompute its own hash",
			edit: func(t *testing.T, b *bolt.Bucket) error {
				v := bytes.Replace(get(b, 9), []byte(`"amount":3009`), []byte(`"amount":39`), 1)
				return b.Put(key(recs[9]), reseal(t, v))
			},
			// Record 9 is self-consistent now; record 10 still names the
			// old hash.
			index: 10, id: recs[10].ID, reason: audit.ReasonPrev, wantCount: n,
		},
		{
			name: "move the last record to a later key",
			edit: func(t *testing.T, b *bolt.Bucket) error {
				v := get(b, n-1)
				if err := b.Delete(key(recs[n-1])); err != nil {
					return err
				}
				return b.Put([]byte("7ZZZZZZZZZZZZZZZZZZZZZZZZZ"), v)
			},
			index: n - 1, id: "7ZZZZZZZZZZZZZZZZZZZZZZZZZ", reason: audit.ReasonID, wantCount: n,
		},
		{
			name: "the last record re-keyed under an id that is not a canonical ULID",
			edit: func(t *testing.T, b *bolt.Bucket) error {
				r, err := audit.Decode(get(b, n-1))
				if err != nil {
					return err
				}
				if err := b.Delete(key(r)); err != nil {
					return err
				}
				r.ID = strings.ToLower(r.ID) // parses as the same ULID, sorts last
				v, _ := json.Marshal(r)
				return b.Put(key(r), reseal(t, v))
			},
			index: n - 1, id: strings.ToLower(recs[n-1].ID), reason: audit.ReasonOrder, wantCount: n,
		},
		{
			name: "an extra field the hash does not cover",
			edit: func(t *testing.T, b *bolt.Bucket) error {
				v := get(b, 4)
				return b.Put(key(recs[4]), append(v[:len(v)-1], []byte(`,"approved_by":"lead-dee"}`)...))
			},
			index: 4, id: recs[4].ID, reason: audit.ReasonUndecodable, wantCount: n,
		},
		{
			name:  "garbage in place of record 15",
			edit:  func(t *testing.T, b *bolt.Bucket) error { return b.Put(key(recs[15]), []byte("\x00\x01 not json")) },
			index: 15, id: recs[15].ID, reason: audit.ReasonUndecodable, wantCount: n,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := copyFile(t, orig)
			tamper(t, path, func(b *bolt.Bucket) error { return tc.edit(t, b) })
			rep, err := audit.Verify(openAt(t, path))
			if err != nil {
				t.Fatal(err)
			}
			if rep.OK || rep.Broken == nil {
				t.Fatalf("verify = %+v: the tampering went unnoticed", rep)
			}
			b := rep.Broken
			if b.Index != tc.index || b.ID != tc.id || !strings.HasPrefix(b.Reason, tc.reason) {
				t.Fatalf("first broken link = %s\nwant record %d (%s): %s", b, tc.index, tc.id, tc.reason)
			}
			if rep.Records != tc.wantCount || rep.Head != "" {
				t.Errorf("records %d head %q, want %d and no head", rep.Records, rep.Head, tc.wantCount)
			}
		})
	}

	t.Run("untouched copy", func(t *testing.T) {
		rep, err := audit.Verify(openAt(t, copyFile(t, orig)))
		if err != nil {
			t.Fatal(err)
		}
		if !rep.OK || rep.Records != n || rep.Broken != nil || rep.Head != recs[n-1].Hash {
			t.Fatalf("verify = %+v, want ok with %d records and head %s", rep, n, recs[n-1].Hash)
		}
	})
}

// Rewriting every record from an edit onwards leaves a chain that verifies:
// only a head kept elsewhere shows it. This is the documented limit.
func TestRewrittenTailNeedsAnAnchor(t *testing.T) {
	orig, recs := buildLog(t, 6)
	path := copyFile(t, orig)
	tamper(t, path, func(b *bolt.Bucket) error {
		prev := recs[2].Hash
		for i := 3; i < len(recs); i++ {
			r, err := audit.Decode(b.Get(key(recs[i])))
			if err != nil {
				return err
			}
			r.Prev = prev
			if i == 3 {
				r.Args = json.RawMessage(`{"amount":3,"order":"O-1003"}`)
			}
			if r.Hash, err = r.Sum(); err != nil {
				return err
			}
			v, _ := json.Marshal(r)
			if err := b.Put(key(r), v); err != nil {
				return err
			}
			prev = r.Hash
		}
		return nil
	})
	rep, err := audit.Verify(openAt(t, path))
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK || rep.Head == recs[5].Hash {
		t.Fatalf("verify = %+v: the chain is consistent, and only its head differs from the anchor %s", rep, recs[5].Hash)
	}
}

// In the store too, the chain is checked against its checkpoints: a whole
// chain rewritten with every hash recomputed (by someone with the file
// and no key) fails at the first checkpoint after the change, and a chain
// cut short fails at the checkpoint beyond its end.
func TestVerifyChecksTheStoredCheckpoints(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sidecar.db")
	db := openAt(t, path)
	log, s := newLog(&clock{now: t0}, 7), newSigner(t)
	if err := audit.RegisterKey(db, s); err != nil {
		t.Fatal(err)
	}
	var recs []audit.Record
	for i := range 6 {
		recs = append(recs, mustAppend(t, db, log, refund(i))...)
		checkpoint(t, db, log, s, audit.CheckpointRule{Every: 3, Interval: time.Hour})
	}
	rep, err := audit.Verify(db)
	if err != nil || !rep.OK || rep.Checkpoints != 2 || rep.Anchored != 4 {
		t.Fatalf("before: %+v, %v; want the checkpoints at 1 and 4 matched", rep, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	rewritten := copyFile(t, path)
	tamper(t, rewritten, func(b *bolt.Bucket) error {
		forged := rewrite(t, recs, 2)
		for _, r := range forged[2:] {
			v, err := json.Marshal(r)
			if err != nil {
				return err
			}
			if err := b.Put(key(r), v); err != nil {
				return err
			}
		}
		return nil
	})
	if rep, err := audit.Verify(openAt(t, rewritten)); err != nil || rep.OK || rep.Broken.Index != 3 || rep.Broken.Reason != audit.ReasonCheckpointHead {
		t.Fatalf("rewritten: %+v, %v", rep, err)
	}

	cut := copyFile(t, path)
	tamper(t, cut, func(b *bolt.Bucket) error {
		for _, r := range recs[3:] {
			if err := b.Delete(key(r)); err != nil {
				return err
			}
		}
		return nil
	})
	if rep, err := audit.Verify(openAt(t, cut)); err != nil || rep.OK || rep.Broken.Reason != audit.ReasonCheckpointBeyond {
		t.Fatalf("cut short: %+v, %v", rep, err)
	}
}
