package drill

import (
	"sync/atomic"
	"time"

	"github.com/countersign/countersign/executor/engine"
)

// clock is the simulated clock every component of the stack reads. Only the
// drill moves it, forward, between events; the servers read it from their
// own goroutines, hence the atomic.
type clock struct {
	ns atomic.Int64
}

var _ engine.Clock = (*clock)(nil)

func newClock(t time.Time) *clock {
	c := &clock{}
	c.ns.Store(t.UnixNano())
	return c
}

// Now implements engine.Clock.
func (c *clock) Now() time.Time { return time.Unix(0, c.ns.Load()).UTC() }

// set moves the clock to t; it never goes back.
func (c *clock) set(t time.Time) {
	if n := t.UnixNano(); n > c.ns.Load() {
		c.ns.Store(n)
	}
}
