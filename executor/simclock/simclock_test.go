package simclock_test

import (
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/executor/simclock"
)

func TestClock(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	c := simclock.New(t0)
	c.Advance(90 * time.Second)
	c.Set(t0) // never back
	if got := c.Now(); !got.Equal(t0.Add(90 * time.Second)) {
		t.Fatalf("Now = %v", got)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() { defer wg.Done(); c.Advance(time.Second); _ = c.Now() }()
	}
	wg.Wait()
	if got := c.Now().Sub(t0); got != 98*time.Second {
		t.Fatalf("after concurrent advances: %v", got)
	}
}
