package clock

import "time"

// Clock tells the time. It is the same shape as jwx's jwt.Clock, so a Clock
// can be handed to jwt.WithClock as it is.
type Clock interface {
	Now() time.Time
}

// Wall is the real clock. It reads in UTC, as the dev stack's clock always
// has, so a timestamp prints the same whatever the host's time zone.
type Wall struct{}

// Now is the current time in UTC.
func (Wall) Now() time.Time { return time.Now().UTC() }

var _ Clock = Wall{}
