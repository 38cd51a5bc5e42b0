// Package simclock is the simulated clock that the drill, the demo and the
// tests run countersign on: time moves only when the owner moves it, so a
// run is repeatable to the byte and nothing sleeps. Every component reads
// it from its own goroutine, hence the atomic.
package simclock

import (
	"sync/atomic"
	"time"

	"github.com/countersign/countersign/executor/clock"
)

// Clock is a simulated clock: the clock.Clock every component's Options
// take, with the hands the owner moves.
type Clock struct {
	ns atomic.Int64
}

var _ clock.Clock = (*Clock)(nil)

// New returns a clock standing at t.
func New(t time.Time) *Clock {
	c := &Clock{}
	c.ns.Store(t.UnixNano())
	return c
}

// Now is the clock's time, in UTC.
func (c *Clock) Now() time.Time { return time.Unix(0, c.ns.Load()).UTC() }

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// Set moves the clock to t if t is later; time never goes back.
func (c *Clock) Set(t time.Time) {
	for {
		old, n := c.ns.Load(), t.UnixNano()
		if n <= old || c.ns.CompareAndSwap(old, n) {
			return
		}
	}
}
