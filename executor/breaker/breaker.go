// Package breaker is the sliding window of a circuit breaker on semantic
// failures: calls that were well-formed HTTP but wrong in substance (a
// policy denial, a schema rejection, a refusal by a system of record, an
// outcome nobody can vouch for). The engine keeps one State per tool and
// agent version in its store and records each failure inside the
// transaction that saw it, so the window survives a restart and two
// failures never overwrite each other.
//
// A State trips when its window holds Limits.MaxFailures failures; a
// tripped state stays tripped, whatever the window does afterwards, until
// an operator resets it (the zero State). Tripping is about the agent
// version's record, not about the moment: an agent that failed five times
// in a minute has not earned its autonomy back by waiting.
package breaker

import (
	"time"
)

// Limits are the thresholds: MaxFailures failures within Window trip.
type Limits struct {
	Window      time.Duration
	MaxFailures int
}

// State is one breaker: the failures inside the window, oldest first, and
// the trip, once there is one.
type State struct {
	Failures []time.Time `json:"failures,omitempty"`
	Trip     *Trip       `json:"trip,omitempty"`
}

// Trip is what tripped a breaker, for the operator who resets it.
type Trip struct {
	At time.Time `json:"at"`
	// Failures is how many failures the window held, WindowSeconds how long
	// the window was.
	Failures      int   `json:"failures"`
	WindowSeconds int64 `json:"window_seconds"`
	// Last is the failure that tripped it ("policy_denied R3-region-mismatch").
	Last string `json:"last"`
}

// Tripped reports whether the breaker is tripped.
func (s State) Tripped() bool { return s.Trip != nil }

// Record adds a failure (what, at now) and returns the new state and
// whether this failure tripped it. Failures older than the window are
// dropped first; a tripped state only keeps counting.
func (s State) Record(now time.Time, lim Limits, what string) (State, bool) {
	cut := now.Add(-lim.Window)
	kept := make([]time.Time, 0, len(s.Failures)+1)
	for _, at := range s.Failures {
		if at.After(cut) {
			kept = append(kept, at)
		}
	}
	s.Failures = append(kept, now)
	if s.Trip != nil || len(s.Failures) < lim.MaxFailures {
		return s, false
	}
	s.Trip = &Trip{At: now, Failures: len(s.Failures), WindowSeconds: int64(lim.Window / time.Second), Last: what}
	return s, true
}
