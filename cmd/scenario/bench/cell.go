package bench

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/countersign/countersign/cmd/scenario/bench/latency"
)

// tally is what one agent (and then a whole cell) saw.
type tally struct {
	requests int
	done     int
	problems map[string]int
	propose  []time.Duration
	total    []time.Duration
	renewed  int         // orders added during the cell
	doneBy   map[int]int // done steps per sidecar slot
	err      error
}

func newTally() *tally { return &tally{problems: map[string]int{}, doneBy: map[int]int{}} }

func (x *tally) record(slot int, o outcome) {
	x.requests++
	if o.problem != "" {
		x.problems[o.problem]++
		return
	}
	x.done++
	x.doneBy[slot]++
	x.propose = append(x.propose, o.propose)
	if o.total > 0 {
		x.total = append(x.total, o.total)
	}
}

func (x *tally) merge(y *tally) {
	x.requests += y.requests
	x.done += y.done
	for k, v := range y.problems {
		x.problems[k] += v
	}
	for k, v := range y.doneBy {
		x.doneBy[k] += v
	}
	x.propose = append(x.propose, y.propose...)
	x.total = append(x.total, y.total...)
	x.renewed += y.renewed
	if x.err == nil {
		x.err = y.err
	}
}

// counters are the figures read before and after a cell.
type counters struct {
	at      time.Time
	cpu     time.Duration
	commits map[string]uint64
	retries uint64 // summed over the sidecars' stores
	store   latency.Counts
}

func (t *target) read() (counters, error) {
	c := counters{at: time.Now()}
	if t.stack == nil {
		return c, nil
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return c, fmt.Errorf("bench: getrusage: %w", err)
	}
	c.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	if t.proxy != nil {
		c.store = t.proxy.Counts()
	}
	for _, db := range t.stores {
		c.retries += db.Retries()
	}
	var err error
	c.commits, err = t.commits()
	return c, err
}

// runCell runs n agents of sys for o.Duration and makes its row. The
// agents' orders are added before the counters are read.
func runCell(ctx context.Context, o Options, t *target, n int, sys system) (Row, error) {
	agents, err := t.newAgents(ctx, sys.name(), n)
	if err != nil {
		return Row{}, err
	}
	before, err := t.read()
	if err != nil {
		return Row{}, err
	}
	deadline := before.at.Add(o.Duration)
	all := newTally()
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for _, a := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := drive(ctx, t, sys, a, deadline)
			mu.Lock()
			all.merge(mine)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if all.err != nil {
		return Row{}, all.err
	}
	if err := ctx.Err(); err != nil {
		return Row{}, fmt.Errorf("bench: interrupted: %w", err)
	}
	after, err := t.read()
	if err != nil {
		return Row{}, err
	}
	return makeRow(t, sys.name(), n, all, before, after), nil
}

// drive is one agent's loop: steps until the deadline, a fresh order every
// RefundsPerOrder refunds.
func drive(ctx context.Context, t *target, sys system, a *agent, deadline time.Time) *tally {
	x := newTally()
	for ctx.Err() == nil && time.Now().Before(deadline) {
		if a.left == 0 {
			if x.err = t.renewOrder(ctx, a); x.err != nil {
				return x
			}
			x.renewed++
		}
		a.left--
		x.record(a.slot, sys.step(ctx, t, a))
	}
	return x
}
