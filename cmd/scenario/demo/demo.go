package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"
)

// Options configure Run.
type Options struct {
	// Dir is the parent of every scenario's data directory. Required; Run
	// leaves what it creates there for the caller to remove.
	Dir string
	// Progress receives one line per section as it finishes. Default: discard.
	Progress io.Writer
	// Parallel bounds how many stacks run at once in the crash matrix and
	// the control-removal matrix. Default: twice GOMAXPROCS (the scenarios
	// mostly wait on fsync and loopback HTTP).
	Parallel int
}

// Report is everything the demo prints, in order. Its JSON keys are the
// ones `countersign demo --json` promises.
type Report struct {
	PolicyDecisions   PolicyDecisions   `json:"policy_decisions"`
	ApprovalAuthority ApprovalAuthority `json:"approval_authority"`
	Binding           Binding           `json:"binding"`
	Gate              Gate              `json:"gate"`
	CrashMatrix       CrashMatrix       `json:"crash_matrix"`
	Reconciliation    Reconciliation    `json:"reconciliation"`
	Controls          Matrix            `json:"controls"`
}

// section is one part of the demo: it runs into the report.
type section struct {
	name string
	run  func(ctx context.Context, dir string, r *Report) error
}

func sections(parallel int) []section {
	return []section{
		{"policy decisions", func(ctx context.Context, dir string, r *Report) (err error) {
			r.PolicyDecisions, err = RunPolicyDecisions(ctx, dir)
			return err
		}},
		{"approval authority", func(ctx context.Context, dir string, r *Report) (err error) {
			r.ApprovalAuthority, err = RunApprovalAuthority(ctx, dir, Without())
			return err
		}},
		{"binding", func(ctx context.Context, dir string, r *Report) (err error) {
			r.Binding, err = RunBinding(ctx, dir, Without())
			return err
		}},
		{"the gate", func(ctx context.Context, dir string, r *Report) (err error) {
			r.Gate, err = RunGate(ctx, dir)
			return err
		}},
		{"crash matrix", func(ctx context.Context, dir string, r *Report) (err error) {
			r.CrashMatrix, err = RunCrashMatrix(ctx, dir, parallel)
			return err
		}},
		{"reconciliation", func(ctx context.Context, dir string, r *Report) (err error) {
			r.Reconciliation, err = RunReconciliation(ctx, dir)
			return err
		}},
		{"control-removal matrix", func(ctx context.Context, dir string, r *Report) (err error) {
			r.Controls, err = RunControls(ctx, dir, parallel)
			return err
		}},
	}
}

// Run runs every section in order, each on stacks of its own under
// o.Dir, and returns the report. It stops at the first section that could
// not run; a matrix whose controls did not prove load-bearing is not an
// error here (see Matrix.Problems).
func Run(ctx context.Context, o Options) (Report, error) {
	var r Report
	if o.Dir == "" {
		return r, errors.New("demo: Options.Dir is required")
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.Parallel < 1 {
		o.Parallel = 2 * runtime.GOMAXPROCS(0)
	}
	all := sections(o.Parallel)
	for i, s := range all {
		began := time.Now()
		dir, err := os.MkdirTemp(o.Dir, fmt.Sprintf("%d-", i+1))
		if err != nil {
			return r, err
		}
		if err := s.run(ctx, dir, &r); err != nil {
			return r, fmt.Errorf("demo: %s: %w", s.name, err)
		}
		fmt.Fprintf(o.Progress, "demo: [%d/%d] %s done in %.1fs\n", i+1, len(all), s.name, time.Since(began).Seconds())
	}
	return r, nil
}

// WriteText prints every section in order, separated by blank lines.
func (r Report) WriteText(w io.Writer) error {
	parts := []interface{ WriteText(io.Writer) error }{
		r.PolicyDecisions, r.ApprovalAuthority, r.Binding, r.Gate, r.CrashMatrix, r.Reconciliation, r.Controls,
	}
	for i, p := range parts {
		if i > 0 {
			if _, err := io.WriteString(w, "\n"); err != nil {
				return err
			}
		}
		if err := p.WriteText(w); err != nil {
			return err
		}
	}
	return nil
}
