// Package fault injects the failures of a system of record that countersign
// must survive or detect: a response lost after the commit, a slow answer,
// a write acknowledged and then lost, an adapter bug that records a wrong
// amount, a system down that refuses writes before any effect. The crash matrix, the dispatch retry tests and the reconciliation
// classes are built on them.
//
// Faults are counters, never on by default. Each write that a fault affects
// consumes one unit of that fault's counter: lose_write and wrong_amount
// affect new writes only, lose_response also a replayed answer to a
// repeated idempotency key (it is the answer that gets lost). The delays
// apply while they are set: delay_ms to every request, delay_writes_ms to
// writes only (POST, PUT, PATCH, DELETE), so that a caller can read the
// order, then send a write that gets no answer in time. They are set from Go ([Injector.Set]), over HTTP
// (PUT /_sim/faults with the JSON of [Faults]; GET returns the current
// counters and, as held, how many requests a delay holds now) or by flags
// of the sim command. A request keeps the delay it began with when the
// faults change; POST /_sim/faults/release ([Injector.Release]) ends the
// delays of the requests held now. A delayed request is acted on after its delay, and
// its actor token is checked then (package simserver): a request held past
// its token's exp is refused, as a real system of record must refuse it.
package fault

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/countersign/countersign/executor/sim/simhttp"
)

// Faults are the pending fault counters.
type Faults struct {
	// LoseResponse: commit the write (or look up the replay), then close
	// the connection without answering; the client sees EOF and cannot
	// know whether the write happened.
	LoseResponse int `json:"lose_response"`
	// DelayMS: wait this many milliseconds before answering every request
	// (except the /_sim/ admin endpoints). Not a counter.
	DelayMS int `json:"delay_ms"`
	// DelayWritesMS: wait this many milliseconds more before answering
	// every write request (not the /_sim/ admin endpoints). Not a counter.
	DelayWritesMS int `json:"delay_writes_ms"`
	// LoseWrite: answer 201 as if committed but keep nothing (the storage
	// acknowledged and then lost the write).
	LoseWrite int `json:"lose_write"`
	// WrongAmount (ledger only): record amount/10 instead of the requested
	// amount, as an adapter with a units bug would.
	WrongAmount int `json:"wrong_amount"`
	// Unavailable: answer the next writes 503 unavailable before looking
	// at them: the system is down and nothing happened.
	Unavailable int `json:"unavailable"`
}

// Effects are the faults one write is subject to.
type Effects struct {
	LoseResponse bool
	LoseWrite    bool
	WrongAmount  bool
}

// Injector holds the counters of one system. The zero value injects
// nothing; it is safe for concurrent use.
type Injector struct {
	// NoWrongAmount makes Set refuse a wrong_amount counter (systems
	// that record no amounts).
	NoWrongAmount bool

	mu sync.Mutex
	f  Faults
	// held counts the requests a delay holds now (Held).
	held atomic.Int64
	// release is closed by Release, ending the delays begun before it;
	// nil until a delay or a Release needs one.
	release chan struct{}
}

// ErrInvalid is returned by Set for counters it cannot apply.
var ErrInvalid = errors.New("fault: invalid counters")

// Set replaces the counters.
func (i *Injector) Set(f Faults) error {
	if f.LoseResponse < 0 || f.DelayMS < 0 || f.DelayWritesMS < 0 || f.LoseWrite < 0 || f.WrongAmount < 0 || f.Unavailable < 0 {
		return fmt.Errorf("%w: counters cannot be negative: %+v", ErrInvalid, f)
	}
	if i.NoWrongAmount && f.WrongAmount != 0 {
		return fmt.Errorf("%w: wrong_amount applies to the ledger only", ErrInvalid)
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	i.f = f
	return nil
}

// Get returns the current counters.
func (i *Injector) Get() Faults {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.f
}

// Delay waits out the delay faults that apply to a request (write says
// whether it is a write), or until ctx ends.
func (i *Injector) Delay(ctx context.Context, write bool) error {
	f := i.Get()
	ms := f.DelayMS
	if write {
		ms += f.DelayWritesMS
	}
	d := time.Duration(ms) * time.Millisecond
	if d <= 0 {
		return nil
	}
	released := i.released()
	i.held.Add(1)
	defer i.held.Add(-1)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-released:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// released is the channel the next Release closes.
func (i *Injector) released() chan struct{} {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.release == nil {
		i.release = make(chan struct{})
	}
	return i.release
}

// Release ends the delay of every request held now: they go on at once,
// as if their delay had run out. A delay still set holds the requests
// that come after. A test that holds a request to let something happen
// meanwhile releases it when that has happened, rather than guessing a
// delay long enough.
func (i *Injector) Release() {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.release != nil {
		close(i.release)
	}
	i.release = make(chan struct{})
}

// Take consumes one unit of each pending counter for one new write and
// reports which faults apply to it. amounts says whether the write records
// a requested amount (only those consume wrong_amount).
func (i *Injector) Take(amounts bool) Effects {
	i.mu.Lock()
	defer i.mu.Unlock()
	var e Effects
	if i.f.LoseResponse > 0 {
		i.f.LoseResponse--
		e.LoseResponse = true
	}
	if i.f.LoseWrite > 0 {
		i.f.LoseWrite--
		e.LoseWrite = true
	}
	if amounts && i.f.WrongAmount > 0 {
		i.f.WrongAmount--
		e.WrongAmount = true
	}
	return e
}

// TakeUnavailable consumes one unit of unavailable, reporting whether
// this write is to be answered 503 before anything is done.
func (i *Injector) TakeUnavailable() bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.f.Unavailable > 0 {
		i.f.Unavailable--
		return true
	}
	return false
}

// TakeReplay consumes lose_response for an answer that replays a recorded
// write; the other faults do not apply to it.
func (i *Injector) TakeReplay() Effects {
	i.mu.Lock()
	defer i.mu.Unlock()
	var e Effects
	if i.f.LoseResponse > 0 {
		i.f.LoseResponse--
		e.LoseResponse = true
	}
	return e
}

// DropResponse closes the client's connection without writing a response:
// the lose-response fault. It returns simhttp.ErrAnswered so a handler can
// return it directly.
func DropResponse(w http.ResponseWriter) error {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return fmt.Errorf("fault: dropping the response: %w", err)
	}
	if err := conn.Close(); err != nil {
		return fmt.Errorf("fault: dropping the response: %w", err)
	}
	return simhttp.ErrAnswered
}

// Held is how many requests the delay faults hold at this moment: a test
// that needs a request to be on its way (sent, not yet acted on) waits for
// it rather than for a guessed time.
func (i *Injector) Held() int { return int(i.held.Load()) }

// State is what GET /_sim/faults answers: the counters and how many
// requests the delays hold now (read only).
type State struct {
	Faults
	Held int `json:"held"`
}

// Routes serves GET and PUT /_sim/faults on rt.
func (i *Injector) Routes(rt *simhttp.Router) {
	rt.Handle(http.MethodGet, "/_sim/faults", func(w http.ResponseWriter, _ *http.Request) error {
		simhttp.WriteJSON(w, http.StatusOK, State{Faults: i.Get(), Held: i.Held()})
		return nil
	})
	rt.Handle(http.MethodPost, "/_sim/faults/release", func(w http.ResponseWriter, _ *http.Request) error {
		held := i.Held()
		i.Release()
		simhttp.WriteJSON(w, http.StatusOK, map[string]int{"released": held})
		return nil
	})
	rt.Handle(http.MethodPut, "/_sim/faults", func(w http.ResponseWriter, r *http.Request) error {
		body, err := simhttp.ReadBody(w, r)
		if err != nil {
			return err
		}
		f, err := Decode(body)
		if err != nil {
			return err
		}
		if err := i.Set(f); err != nil {
			return simhttp.Errorf(http.StatusUnprocessableEntity, simhttp.CodeInvalidField, "%v", err)
		}
		simhttp.WriteJSON(w, http.StatusOK, i.Get())
		return nil
	})
}

// Decode reads the JSON of Faults strictly; absent counters are zero.
func Decode(body []byte) (Faults, error) {
	fields, err := simhttp.Object(body, false)
	if err != nil {
		return Faults{}, err
	}
	var f Faults
	for _, c := range []struct {
		name string
		dst  *int
	}{
		{"lose_response", &f.LoseResponse},
		{"delay_ms", &f.DelayMS},
		{"delay_writes_ms", &f.DelayWritesMS},
		{"lose_write", &f.LoseWrite},
		{"wrong_amount", &f.WrongAmount},
		{"unavailable", &f.Unavailable},
	} {
		if *c.dst, err = fields.Count(c.name); err != nil {
			return Faults{}, err
		}
	}
	return f, fields.Done()
}
