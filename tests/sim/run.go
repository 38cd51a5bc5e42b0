package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/tool"
)

// DefaultEvents is how many workload and fault events one seed draws.
const DefaultEvents = 60

// Options configure a run of seeds. The zero value is the designed
// system with DefaultEvents per seed in the system's temp directory.
type Options struct {
	// Controls default to engine.DefaultControls; the tests that show
	// the harness finds a removed control remove one.
	Controls *engine.Controls
	// Events per seed. Zero: DefaultEvents.
	Events int
	// Dir holds each seed's files while it runs. Empty: os.TempDir().
	Dir string
	// KeepTrace keeps the trace's lines in Result.TraceLines (a replay).
	KeepTrace bool
	// Workers run seeds at once. Zero: GOMAXPROCS.
	Workers int

	// drop leaves out the planned events of these indexes (shrinking).
	drop map[int]bool
}

// Result is one seed's run.
type Result struct {
	Seed uint64 `json:"seed"`
	// Trace is the first 16 hex digits of the SHA-256 of the event
	// trace: the same seed gives the same trace.
	Trace    string      `json:"trace_hash"`
	Lines    int         `json:"lines"`
	Restarts int         `json:"restarts"`
	Found    []Violation `json:"violations,omitempty"`
	// Replay is how to run this seed again.
	Replay string `json:"replay,omitempty"`
	// Trace lines, with Options.KeepTrace.
	TraceLines []string `json:"-"`
}

// Failed reports whether an invariant broke.
func (r Result) Failed() bool { return len(r.Found) > 0 }

// ReplayCommands are the two ways to run one seed again.
func ReplayCommands(seed uint64) string {
	return fmt.Sprintf("go test ./tests/sim -run TestSimulate -seed %d -seeds 1 -v   or   countersign simulate --seed %d --trace", seed, seed)
}

// Run runs one seed: a world is built, the workload and its faults are
// drawn and run from this goroutine, the world settles (the network
// heals, every delayed request is delivered, the clock passes every
// token's expiry, the engine resumes everything) and the invariants are
// checked. An error is a failure of the harness, not of countersign.
func Run(ctx context.Context, seed uint64, o Options) (Result, error) {
	sh, err := newShared()
	if err != nil {
		return Result{}, err
	}
	return run(ctx, seed, o, sh)
}

func run(ctx context.Context, seed uint64, o Options, sh *shared) (Result, error) {
	controls := engine.DefaultControls()
	if o.Controls != nil {
		controls = *o.Controls
	}
	events := o.Events
	if events <= 0 {
		events = DefaultEvents
	}
	w, err := open(seed, o.Dir, controls, sh)
	if err != nil {
		return Result{}, err
	}
	defer w.close()
	w.trace.keep = o.KeepTrace
	w.net.faulty = []float64{0, 0.05, 0.15, 0.3}[w.rng.IntN(4)]
	steps := plan(w.rng, events)
	w.tracef("seed %d: %d orders, network faults %.2f, receivers' clocks %s behind, %s, releases %v", seed, len(w.orderList), w.net.faulty, w.skew,
		w.sidecarsLine(), w.releases)
	for i, p := range steps {
		if o.drop[i] {
			continue
		}
		if err := w.step(ctx, p); err != nil {
			return Result{}, fmt.Errorf("seed %d: %w", seed, err)
		}
	}
	if err := w.settle(ctx); err != nil {
		return Result{}, fmt.Errorf("seed %d: %w", seed, err)
	}
	if err := w.checkEnd(); err != nil {
		return Result{}, fmt.Errorf("seed %d: %w", seed, err)
	}
	r := Result{Seed: seed, Trace: w.trace.sum(), Lines: w.trace.n, Restarts: w.restarts, Found: w.violations, TraceLines: w.trace.lines}
	if r.Failed() {
		r.Replay = ReplayCommands(seed)
	}
	return r, nil
}

// settle heals the network, delivers what it still holds once every
// token that could carry an effect has expired, and resumes every open
// workflow, as a sidecar started after an outage would; then a paused
// sidecar comes back, past its lease, to the world the others left, and
// the first active sidecar resumes once more.
func (w *world) settle(ctx context.Context) error {
	w.rng = rand.New(rand.NewPCG(w.seed, 0x5e771e))
	w.net.faulty = 0
	w.armed, w.downAt = "", ""
	w.storeUp()
	w.tracef("settle")
	w.clock.Advance(5 * time.Minute)
	w.net.release(-1)
	sc := w.active()[0]
	// A step started before its tool was switched off waits, started,
	// for the switch: an operator turns every tool on again.
	for _, name := range []tool.Name{tool.IssueRefund, tool.ReshipOrder} {
		if !w.switches[name] {
			if err := sc.eng.SetSwitch(ctx, person("ops-ida"), name, true, "sim: settle"); err != nil {
				return w.fatal(err)
			}
			w.switches[name] = true
			w.tracef("%s: switch %s on=true", sc.name, name)
		}
	}
	err := sc.eng.ResumeAll(ctx)
	w.quiesce()
	w.tracef("%s: settle: resume all: %s", sc.name, errClass(err))
	resumed := false
	for _, p := range w.sidecars {
		if p.paused != nil {
			if err := w.resumePaused(p); err != nil {
				return w.fatal(err)
			}
			resumed = true
		}
	}
	if resumed {
		err := sc.eng.ResumeAll(ctx)
		w.quiesce()
		w.tracef("%s: settle: resume all: %s", sc.name, errClass(err))
	}
	return nil
}

// sidecarsLine describes the world's sidecars for the trace.
func (w *world) sidecarsLine() string {
	if !w.fleet {
		return "one sidecar"
	}
	line := fmt.Sprintf("a fleet of %d", len(w.sidecars))
	for _, sc := range w.sidecars {
		line += fmt.Sprintf(", %s %s ahead", sc.name, sc.ahead)
	}
	return line
}

// Summary is a run of many seeds: each seed's result (its trace hash, and
// the invariants it broke), the failed ones again, and Violations, the
// number of invariants broken over all seeds.
type Summary struct {
	Seeds      int           `json:"seeds"`
	First      uint64        `json:"first_seed"`
	Violations int           `json:"violations"`
	Failed     []Result      `json:"failed"`
	Took       time.Duration `json:"took_ns"`
	PerSec     float64       `json:"seeds_per_second"`
	Results    []Result      `json:"results"`
}

// RunSeeds runs seeds first, first+1, ... first+n-1 on Options.Workers
// goroutines (each seed on one), calling each, if set, with every result
// in seed order. It stops at the first harness error.
func RunSeeds(ctx context.Context, first uint64, n int, o Options, each func(Result)) (Summary, error) {
	sh, err := newShared()
	if err != nil {
		return Summary{}, err
	}
	return runSeeds(ctx, first, n, o, sh, each)
}

// runSeeds is RunSeeds with the bundles already loaded.
func runSeeds(ctx context.Context, first uint64, n int, o Options, sh *shared, each func(Result)) (Summary, error) {
	if o.Dir == "" {
		o.Dir = os.TempDir()
	}
	workers := o.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	start := time.Now()
	results := make([]Result, n)
	errs := make([]error, n)
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				results[i], errs[i] = run(ctx, first+uint64(i), o, sh)
			}
		}()
	}
	for i := 0; i < n && ctx.Err() == nil; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	s := Summary{Seeds: n, First: first, Took: time.Since(start), Results: results, Failed: []Result{}}
	if err := errors.Join(errs...); err != nil {
		return s, err
	}
	if err := ctx.Err(); err != nil {
		return s, err
	}
	for _, r := range results {
		if each != nil {
			each(r)
		}
		if r.Failed() {
			s.Failed = append(s.Failed, r)
		}
		s.Violations += len(r.Found)
	}
	s.PerSec = float64(n) / s.Took.Seconds()
	return s, nil
}

// Broke reports whether the run broke inv.
func (r Result) Broke(inv Invariant) bool {
	for _, v := range r.Found {
		if v.Invariant == inv {
			return true
		}
	}
	return false
}

// Search runs seeds first, first+1, ... up to n of them, Workers at a
// time, and returns the lowest seed whose result hit reports true.
func Search(ctx context.Context, first uint64, n int, o Options, hit func(Result) bool) (Result, bool, error) {
	workers := o.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	sh, err := newShared()
	if err != nil {
		return Result{}, false, err
	}
	for done := 0; done < n; done += workers {
		k := min(workers, n-done)
		sum, err := runSeeds(ctx, first+uint64(done), k, o, sh, nil)
		if err != nil {
			return Result{}, false, err
		}
		for _, r := range sum.Results {
			if hit(r) {
				return r, true, nil
			}
		}
	}
	return Result{}, false, nil
}
