package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/countersign/countersign/executor/money"
)

// A spending index answers "how much did this rep (or the agent) spend
// since t" for a rolling window. It keeps two bbolt buckets:
//
//   - entries: one key per spent refund, prefix, NUL, the reservation time
//     (8 big-endian bytes of Unix nanoseconds), the step key; value: the
//     amount in cents, 8 big-endian bytes.
//   - sums: the running sum of those entries per bucket of time, for each
//     width of spentWidths: prefix, NUL, the width's index (one byte), the
//     bucket's start (8 big-endian bytes of Unix nanoseconds), then on a
//     shared store the writer's partition; value: the sum in cents; absent
//     means zero.
//
// On a shared store every sidecar adds its refunds to sums of its own
// partition (pgTx.partition, random per open), whose bytes follow the
// entry's amount in its value, so that a refund is taken back out of the
// sum it went into. A range of sum keys from one bucket start to another
// holds every partition's sums for the buckets between them, so a window
// total reads the same ranges as without partitions; but two sidecars
// spending in the same second write different rows, and neither waits
// for the other's transaction to end.
//
// A window total reads the whole hours in the window, then the whole
// minutes before the first of them, then the whole seconds, then only the
// entries of the partial second at the window's start. It therefore reads
// at most 24 hour keys for a day, 59 minute and 59 second keys, and one
// second's entries, however many refunds the window holds; without the
// sums, a busy agent's hour would be tens of thousands of entries per
// decision, read twice (to decide and to check inside the writer).
type spentIndex struct {
	entries, sums []byte
}

var (
	bRepSpentSums   = []byte("spent_by_rep_sums")
	bAgentSpentSums = []byte("spent_by_agent_sums")
	repSpent        = spentIndex{entries: bRepSpent, sums: bRepSpentSums}
	agentSpent      = spentIndex{entries: bAgentSpent, sums: bAgentSpentSums}
)

// spentWidths are the widths of the running sums, coarsest first: each
// divides the one before, so the ranges a window total reads meet exactly.
var spentWidths = []time.Duration{time.Hour, time.Minute, time.Second}

// timeKey orders spending entries by reservation time, then by step.
func timeKey(prefix string, at time.Time, s Step) []byte {
	k := append([]byte(prefix), 0)
	k = binary.BigEndian.AppendUint64(k, uint64(at.UnixNano()))
	return append(k, stepKey(s.Workflow, s.N)...)
}

// sumKey is the key of partition's running sum of width
// spentWidths[level] for the bucket starting at start (Unix nanoseconds).
func sumKey(prefix string, level int, start int64, partition []byte) []byte {
	return append(appendSumKey(nil, prefix, level, start), partition...)
}

func appendSumKey(dst []byte, prefix string, level int, start int64) []byte {
	dst = append(append(dst, prefix...), 0, byte(level))
	return binary.BigEndian.AppendUint64(dst, uint64(start))
}

// floorTo is the start of the bucket of width w that holds at.
func floorTo(at int64, w time.Duration) int64 {
	r := at % int64(w)
	if r < 0 {
		r += int64(w)
	}
	return at - r
}

// ceilTo is the start of the first bucket of width w that begins at or
// after at.
func ceilTo(at int64, w time.Duration) int64 {
	if f := floorTo(at, w); f < at {
		return f + int64(w)
	}
	return at
}

// put records s as spent for prefix: its entry and its share of every
// running sum. PutStep calls it only when s becomes spent, so s has no
// entry yet, and it reads nothing (an entry it replaced would be counted
// twice).
func (ix spentIndex) put(t *Tx, prefix string, s Step) error {
	part := t.kv.partition()
	value := append(u64(uint64(s.Args.Amount)), part...)
	if err := t.bucket(ix.entries).Put(timeKey(prefix, s.ReservedAt, s), value); err != nil {
		return err
	}
	return ix.addSums(t, prefix, s.ReservedAt.UnixNano(), s.Args.Amount, part)
}

// delete removes s's entry for prefix, if there is one, and its amount
// from the running sums.
func (ix spentIndex) delete(t *Tx, prefix string, s Step) error {
	b := t.bucket(ix.entries)
	k := timeKey(prefix, s.ReservedAt, s)
	raw := b.Get(k)
	if raw == nil {
		return nil
	}
	amount, part := money.Cents(binary.BigEndian.Uint64(raw)), bytes.Clone(raw[8:])
	if err := b.Delete(k); err != nil {
		return err
	}
	return ix.addSums(t, prefix, s.ReservedAt.UnixNano(), -amount, part)
}

// addSums adds delta to partition's running sums of every width that
// hold at. The sums are added to, never read here: on PostgreSQL the
// writes ride with the transaction's next read or its commit.
func (ix spentIndex) addSums(t *Tx, prefix string, at int64, delta money.Cents, partition []byte) error {
	b := t.bucket(ix.sums)
	for level, w := range spentWidths {
		if err := b.Add(sumKey(prefix, level, floorTo(at, w), partition), int64(delta)); err != nil {
			return fmt.Errorf("spending sums of %q: %w", prefix, err)
		}
	}
	return nil
}

// since is the sum of prefix's entries reserved at or after since (to the
// nanosecond). Read from the coarsest width to the finest, each range ends
// where the one before began; the entries cover what is left, the part of
// the window before its first whole second.
func (ix spentIndex) since(t *Tx, prefix string, since time.Time) money.Cents {
	return money.Cents(t.kv.sumRanges(ix.ranges(prefix, since)))
}

// ranges are the key ranges whose values add up to since's total: the
// whole hours, minutes and seconds in the window, then the entries before
// its first whole second.
func (ix spentIndex) ranges(prefix string, since time.Time) []keyRange {
	at := since.UnixNano()
	// The ranges' eight keys are cut from one buffer.
	keys := keyBuffer{b: make([]byte, 0, 8*(len(prefix)+10))}
	ranges := make([]keyRange, 0, len(spentWidths)+1)
	end := keys.add(append(append(keys.b, prefix...), 0, 1)) // past every key of width 0
	var bound int64
	for level, w := range spentWidths {
		start := ceilTo(at, w)
		if level > 0 {
			end = keys.add(appendSumKey(keys.b, prefix, level, bound))
		}
		ranges = append(ranges, keyRange{bucket: ix.sums, lo: keys.add(appendSumKey(keys.b, prefix, level, start)), hi: end})
		bound = start
	}
	lo := keys.add(appendTimeBound(keys.b, prefix, at))
	hi := keys.add(appendTimeBound(keys.b, prefix, bound))
	return append(ranges, keyRange{bucket: ix.entries, lo: lo, hi: hi})
}

// spendingBucket reports whether a write to bucket may change a window
// total.
func spendingBucket(bucket string) bool {
	for _, b := range [][]byte{bRepSpent, bRepSpentSums, bAgentSpent, bAgentSpentSums} {
		if bucket == string(b) {
			return true
		}
	}
	return false
}

// keyBuffer holds keys one after another in one array.
type keyBuffer struct{ b []byte }

// add takes the key that extended appended to the buffer.
func (kb *keyBuffer) add(extended []byte) []byte {
	k := extended[len(kb.b):len(extended):len(extended)]
	kb.b = extended
	return k
}

// appendTimeBound appends the first possible entry key of prefix at at
// (Unix nanoseconds).
func appendTimeBound(dst []byte, prefix string, at int64) []byte {
	return binary.BigEndian.AppendUint64(append(append(dst, prefix...), 0), uint64(at))
}

// indexSums builds the running sums from the entries: once, when a store
// written before the sums existed is opened.
func (ix spentIndex) indexSums(t *Tx) error {
	return t.bucket(ix.entries).ForEach(func(k, v []byte) error {
		i := bytes.IndexByte(k, 0)
		if i < 0 || len(k) < i+9 {
			return fmt.Errorf("spending entry %q: malformed key", k)
		}
		at := int64(binary.BigEndian.Uint64(k[i+1 : i+9]))
		return ix.addSums(t, string(k[:i]), at, money.Cents(binary.BigEndian.Uint64(v)), v[8:])
	})
}

// RepSpentSince is the sum of the rep's spent refunds reserved at or after
// since, under every spelling of rep (repKey).
func (t *Tx) RepSpentSince(rep string, since time.Time) money.Cents {
	return repSpent.since(t, repKey(rep), since)
}

// AgentSpentSince is the sum of all spent refunds reserved at or after since.
func (t *Tx) AgentSpentSince(since time.Time) money.Cents {
	return agentSpent.since(t, "", since)
}
