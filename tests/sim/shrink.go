package sim

import (
	"context"
	"fmt"
	"slices"
)

// Shrunk is the shortest plan found that still breaks an invariant.
type Shrunk struct {
	Seed      uint64    `json:"seed"`
	Invariant Invariant `json:"invariant"`
	// Kept are the indexes of the seed's planned events that remain; the
	// others were dropped.
	Kept  []int    `json:"kept"`
	Of    int      `json:"of"`
	Runs  int      `json:"runs"`
	Trace []string `json:"trace"`
}

// Shrink drops planned events of seed while the run still breaks inv:
// halves of what is left, then quarters, down to single events, again
// until nothing more can go. Each event draws from its own source, so
// what is kept runs as it did in the whole plan, but for what the dropped
// events changed in the world. The result's trace is that of the
// shortest failing run.
func Shrink(ctx context.Context, seed uint64, o Options, inv Invariant) (Shrunk, error) {
	sh, err := newShared()
	if err != nil {
		return Shrunk{}, err
	}
	events := o.Events
	if events <= 0 {
		events = DefaultEvents
	}
	o.KeepTrace = true
	kept := make([]int, events)
	for i := range kept {
		kept[i] = i
	}
	out := Shrunk{Seed: seed, Invariant: inv, Of: events}
	fails := func(keep []int) (Result, bool, error) {
		out.Runs++
		o.drop = map[int]bool{}
		for i := range events {
			if !slices.Contains(keep, i) {
				o.drop[i] = true
			}
		}
		r, err := run(ctx, seed, o, sh)
		return r, err == nil && r.Broke(inv), err
	}
	last, ok, err := fails(kept)
	if err != nil {
		return out, err
	}
	if !ok {
		return out, fmt.Errorf("sim: seed %d does not break %s", seed, inv)
	}
	for chunk := len(kept) / 2; chunk >= 1; {
		dropped := false
		for start := 0; start < len(kept); {
			try := slices.Concat(kept[:start], kept[min(start+chunk, len(kept)):])
			r, ok, err := fails(try)
			if err != nil {
				return out, err
			}
			if ok {
				kept, last, dropped = try, r, true
				continue
			}
			start += chunk
		}
		if !dropped || chunk > 1 {
			chunk /= 2
		}
	}
	out.Kept, out.Trace = kept, last.TraceLines
	return out, nil
}
