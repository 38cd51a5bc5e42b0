package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

// CrashPoints are the engine's failpoints, in the order a step meets them.
func CrashPoints() []string { return []string{"before_dispatch", "after_dispatch", "after_record"} }

// crashSteps are the two effects of the crash matrix: a refund, which the
// ledger deduplicates by key, and a reshipment, which the order system
// deduplicates by reference (unless the reference_keys control is removed).
var crashSteps = []struct {
	label string
	name  tool.Name
	args  json.RawMessage
	order string
}{
	{"refund", tool.IssueRefund, refundArgs("O-1001", 3000), "O-1001"},
	{"reship", tool.ReshipOrder, orderArgs("O-1001"), "O-1001"},
}

// CrashCell is one crash and resume: how many effects the system of record
// holds afterwards and where the step ended.
type CrashCell struct {
	Effects int              `json:"effects"`
	Status  store.StepStatus `json:"status"`
}

// CrashRow is one step and crash point, on the designed system and with
// the write-ahead record removed. The order system's reference key is
// removed with it in that column: since a reshipment's reference is the
// order system's idempotency key, the key alone catches the second
// reshipment a crash without the write-ahead record would make, so
// removing the write-ahead record alone shows nothing (the control-removal
// matrix shows each of the two holding alone).
type CrashRow struct {
	Step              string    `json:"step"`
	Point             string    `json:"point"`
	Designed          CrashCell `json:"designed"`
	WithoutWriteAhead CrashCell `json:"without_write_ahead"`
}

// CrashMatrix is the crash section: every step crashed at every point,
// then resumed by a new stack over the same data directory.
type CrashMatrix struct {
	Rows []CrashRow `json:"rows"`
}

// RunCrashMatrix runs the twelve crashes, each in its own directory under
// dir, at most parallel at a time.
func RunCrashMatrix(ctx context.Context, dir string, parallel int) (CrashMatrix, error) {
	designed, err := crashColumn(ctx, dir, Without(), parallel)
	if err != nil {
		return CrashMatrix{}, err
	}
	noWAL, err := crashColumn(ctx, dir, Without(WriteAhead, ReferenceKeys), parallel)
	if err != nil {
		return CrashMatrix{}, err
	}
	var m CrashMatrix
	for i := range designed {
		s, p := i/len(CrashPoints()), i%len(CrashPoints())
		m.Rows = append(m.Rows, CrashRow{Step: crashSteps[s].label, Point: CrashPoints()[p],
			Designed: designed[i], WithoutWriteAhead: noWAL[i]})
	}
	return m, nil
}

// crashColumn runs every step at every crash point under controls c, in
// crashSteps x CrashPoints order.
func crashColumn(ctx context.Context, dir string, c engine.Controls, parallel int) ([]CrashCell, error) {
	points := CrashPoints()
	cells := make([]CrashCell, len(crashSteps)*len(points))
	jobs := make([]func(context.Context) error, len(cells))
	for i := range cells {
		step, point := crashSteps[i/len(points)], points[i%len(points)]
		jobs[i] = func(ctx context.Context) error {
			d, err := subdir(dir, "crash-"+step.label+"-"+point)
			if err != nil {
				return err
			}
			cells[i], err = crashOnce(ctx, d, c, step.name, step.args, step.order, point)
			if err != nil {
				return fmt.Errorf("%s crashed at %s: %w", step.label, point, err)
			}
			return nil
		}
	}
	return cells, runJobs(ctx, parallel, jobs)
}

// crashOnce proposes one call on a stack whose engine crashes at point,
// closes that stack, starts a new one over the same directory (which
// resumes the step at start) and counts the effects.
func crashOnce(ctx context.Context, dir string, c engine.Controls, name tool.Name, args json.RawMessage, order, point string) (CrashCell, error) {
	fp := &failpoint{}
	clock := newClock()
	st, err := start(ctx, dir, setup{controls: c, clock: clock, failpoint: fp.hook})
	if err != nil {
		return CrashCell{}, err
	}
	if err := st.open(ctx, "rep-ana", "W1"); err != nil {
		st.Close()
		return CrashCell{}, err
	}
	fp.arm(point)
	if _, err := st.Engine.Propose(ctx, person("rep-ana"), "W1", name, args); !errors.Is(err, engine.ErrCrashed) {
		st.Close()
		return CrashCell{}, fmt.Errorf("the engine did not crash at %s: %v", point, err)
	}
	if err := st.Close(); err != nil {
		return CrashCell{}, err
	}

	// The new stack comes up after every token minted before the crash has
	// expired: a reshipment the crash left started with no shipment is then
	// proven absent, and sent again, by the resume at start (restarted at
	// once, it would wait until then; engine doc, "Effects fenced by time").
	clock.Advance(time.Minute)
	st, err = start(ctx, dir, setup{controls: c, clock: clock})
	if err != nil {
		return CrashCell{}, err
	}
	defer st.Close()
	var cell CrashCell
	if name == tool.IssueRefund {
		refunds, err := st.refunds()
		if err != nil {
			return cell, err
		}
		cell.Effects = len(refunds)
	} else if cell.Effects, err = st.shipments(order); err != nil {
		return cell, err
	}
	s, err := st.step(ctx, "W1", 1)
	cell.Status = s.Status
	return cell, err
}

// failpoint crashes the engine once, at the point it was armed for, as a
// process killed there would stop.
type failpoint struct {
	mu    sync.Mutex
	point string
}

func (f *failpoint) arm(point string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.point = point
}

func (f *failpoint) hook(point string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.point != "" && f.point == point {
		f.point = ""
		return engine.ErrCrashed
	}
	return nil
}

// runJobs runs jobs, at most parallel at once, and returns their errors
// joined. A failed job does not stop the others: each owns its directory.
func runJobs(ctx context.Context, parallel int, jobs []func(context.Context) error) error {
	if parallel < 1 {
		parallel = 1
	}
	sem := make(chan struct{}, parallel)
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	for i, job := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				errs[i] = ctx.Err()
				return
			}
			defer func() { <-sem }()
			errs[i] = job(ctx)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
