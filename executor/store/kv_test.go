package store

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/countersign/countersign/executor/pgtest"
)

// TestPostgresWalksAsBboltDoes: random walks over the same keys, with
// bbolt's answers as the reference: every First, Last, Seek, SeekRange,
// Next and Prev on PostgreSQL lands on the same key with the same value,
// across page boundaries, ends of ranges and turns of direction.
func TestPostgresWalksAsBboltDoes(t *testing.T) {
	bdb, err := Open(filepath.Join(t.TempDir(), "state.db"), Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	pdb, err := OpenPostgres(context.Background(), pgtest.URL(t), PostgresOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer pdb.Close()
	r := rand.New(rand.NewPCG(3, 5))
	// Keys share prefixes, hold 0x00 and 0xff, and vary in length.
	alphabet := []byte{0x00, 0x01, 'a', 'b', 0xfe, 0xff}
	key := func(r *rand.Rand) []byte {
		k := make([]byte, 1+r.IntN(4))
		for i := range k {
			k[i] = alphabet[r.IntN(len(alphabet))]
		}
		return k
	}
	var keys [][]byte
	for range 700 {
		keys = append(keys, key(r))
	}
	fill := func(tx *Tx) error {
		for i, k := range keys {
			if err := tx.bucket(bSwitches).Put(k, []byte(fmt.Sprint(i))); err != nil {
				return err
			}
		}
		return nil
	}
	if err := bdb.Update(fill); err != nil {
		t.Fatal(err)
	}
	if err := pdb.Update(fill); err != nil {
		t.Fatal(err)
	}
	// walk runs the same random moves on db and returns what each saw.
	walk := func(db *DB, seed uint64) []string {
		r := rand.New(rand.NewPCG(seed, 1))
		var seen []string
		err := db.View(func(tx *Tx) error {
			b := tx.bucket(bSwitches)
			c := b.Cursor()
			var k, v []byte
			for range 400 {
				move := r.IntN(10)
				if k == nil && move >= 5 {
					move = r.IntN(5) // off the ends, only a jump places the cursor again
				}
				switch move {
				case 0:
					k, v = c.First()
				case 1:
					k, v = c.Last()
				case 2, 3:
					k, v = c.Seek(key(r))
				case 4:
					lo, hi := key(r), key(r)
					if bytes.Compare(lo, hi) > 0 {
						lo, hi = hi, lo
					}
					if r.IntN(2) == 0 {
						k, v = c.SeekRange(lo, hi) // the moves after it walk up to hi
						break
					}
					n := 0
					_ = walk(b, lo, hi, func(k, v []byte) error { n++; seen = append(seen, fmt.Sprintf("range %x %s", k, v)); return nil })
					seen = append(seen, fmt.Sprintf("range [%x, %x): %d", lo, hi, n))
					continue
				case 5, 6, 7:
					for range 1 + r.IntN(40) {
						if k, v = c.Next(); k == nil {
							break
						}
					}
				default:
					for range 1 + r.IntN(40) {
						if k, v = c.Prev(); k == nil {
							break
						}
					}
				}
				seen = append(seen, fmt.Sprintf("%d: %x=%s", move, k, v))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return seen
	}
	for seed := range uint64(10) {
		want, got := walk(bdb, seed), walk(pdb, seed)
		for i := range want {
			if i >= len(got) || got[i] != want[i] {
				t.Fatalf("seed %d, move %d: PostgreSQL saw %q, bbolt %q", seed, i, got[min(i, len(got)-1)], want[i])
			}
		}
	}
}
