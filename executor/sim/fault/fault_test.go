package fault_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/countersign/countersign/executor/sim/fault"
)

func TestCountersAreConsumedPerWrite(t *testing.T) {
	var i fault.Injector
	if got := i.Take(true); got != (fault.Effects{}) {
		t.Fatalf("the zero Injector injected %+v", got)
	}
	if err := i.Set(fault.Faults{LoseResponse: 2, LoseWrite: 1, WrongAmount: 1}); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		take func() fault.Effects
		want fault.Effects
	}{
		{func() fault.Effects { return i.Take(false) }, fault.Effects{LoseResponse: true, LoseWrite: true}},
		{i.TakeReplay, fault.Effects{LoseResponse: true}},
		{func() fault.Effects { return i.Take(true) }, fault.Effects{WrongAmount: true}},
		{func() fault.Effects { return i.Take(true) }, fault.Effects{}},
	}
	for n, s := range steps {
		if got := s.take(); got != s.want {
			t.Fatalf("write %d: %+v, want %+v", n+1, got, s.want)
		}
	}
	if f := i.Get(); f != (fault.Faults{}) {
		t.Fatalf("left %+v", f)
	}
}

func TestSetValidates(t *testing.T) {
	i := fault.Injector{NoWrongAmount: true}
	for _, f := range []fault.Faults{{LoseResponse: -1}, {DelayMS: -1}, {DelayWritesMS: -1}, {WrongAmount: 1}} {
		if err := i.Set(f); !errors.Is(err, fault.ErrInvalid) {
			t.Errorf("Set(%+v) = %v", f, err)
		}
	}
}

func TestDecode(t *testing.T) {
	f, err := fault.Decode([]byte(`{"lose_response":1,"delay_ms":250,"delay_writes_ms":900}`))
	if err != nil || f != (fault.Faults{LoseResponse: 1, DelayMS: 250, DelayWritesMS: 900}) {
		t.Fatalf("%+v %v", f, err)
	}
	for _, body := range []string{`{"lose_response":"1"}`, `{"delay":1}`, `{"lose_write":1}x`, `[]`} {
		if _, err := fault.Decode([]byte(body)); err == nil {
			t.Errorf("%s decoded", body)
		}
	}
}

func TestDelayEndsWithContext(t *testing.T) {
	var i fault.Injector
	if err := i.Set(fault.Faults{DelayMS: 60_000}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := i.Delay(ctx, false); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Delay = %v", err)
	}
}

// delay_writes_ms holds writes only: a read is answered at once.
func TestDelayWritesOnly(t *testing.T) {
	var i fault.Injector
	if err := i.Set(fault.Faults{DelayWritesMS: 60_000}); err != nil {
		t.Fatal(err)
	}
	if err := i.Delay(context.Background(), false); err != nil {
		t.Fatalf("a read was delayed: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := i.Delay(ctx, true); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a write: Delay = %v, want held until the deadline", err)
	}
}

// A held request keeps the delay it began with when the faults change, is
// counted as held while it waits, and goes on at once when released; a
// request that comes after the release is held again while the delay is
// set.
func TestReleaseEndsTheDelaysHeldNow(t *testing.T) {
	var i fault.Injector
	if err := i.Set(fault.Faults{DelayWritesMS: 60_000}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- i.Delay(context.Background(), true) }()
	for i.Held() != 1 {
		time.Sleep(time.Millisecond)
	}
	if err := i.Set(fault.Faults{}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Fatalf("the held write went on when the faults changed: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	i.Release()
	if err := <-done; err != nil {
		t.Fatalf("released: %v", err)
	}
	if n := i.Held(); n != 0 {
		t.Fatalf("%d held after the release", n)
	}
	if err := i.Set(fault.Faults{DelayWritesMS: 60_000}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := i.Delay(ctx, true); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a write after the release: %v, want held", err)
	}
}
