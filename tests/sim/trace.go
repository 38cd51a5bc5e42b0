package sim

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"

	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/store"
)

// trace is a run's event trace: one line per event and per thing the
// network did, each prefixed with the simulated seconds since begin. Its
// hash is the run's fingerprint; the lines are kept only when asked for.
type trace struct {
	h     hash.Hash
	lines []string
	keep  bool
	n     int
}

func newTrace() *trace { return &trace{h: sha256.New()} }

func (t *trace) add(line string) {
	t.n++
	t.h.Write([]byte(line))
	t.h.Write([]byte{'\n'})
	if t.keep {
		t.lines = append(t.lines, line)
	}
}

// sum is the first 16 hex digits of the trace's SHA-256.
func (t *trace) sum() string { return hex.EncodeToString(t.h.Sum(nil))[:16] }

func (w *world) tracef(format string, args ...any) {
	at := w.clock.Now().Sub(begin) / 1e9
	w.trace.add(fmt.Sprintf("%6d %s", at, fmt.Sprintf(format, args...)))
}

// errClass names an error by what the engine means by it, never by its
// text, which may carry random ids.
func errClass(err error) string {
	var (
		refused  *engine.Refused
		approval *engine.ApprovalRefused
	)
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, engine.ErrCrashed):
		return "crashed"
	case errors.Is(err, engine.ErrUnavailable):
		return "unavailable"
	case errors.Is(err, engine.ErrOrderNotFound):
		return "order_not_found"
	case errors.As(err, &refused):
		return "refused:" + refused.Code
	case errors.As(err, &approval):
		return "approval_refused:" + approval.Code
	}
	for _, k := range []struct {
		err  error
		name string
	}{
		{engine.ErrNotFound, "not_found"}, {engine.ErrForbidden, "forbidden"}, {engine.ErrWorkflowExists, "workflow_exists"},
		{engine.ErrNotPending, "not_pending"}, {engine.ErrFenced, "fenced"}, {store.ErrNotFound, "not_found"},
	} {
		if errors.Is(err, k.err) {
			return k.name
		}
	}
	return "error"
}

// stepLine is a step as the trace shows it.
func stepLine(s store.Step) string {
	return fmt.Sprintf("%s/%d %s %s %d: %s %s", s.Workflow, s.N, s.Tool, s.Args.Order, s.Args.Amount, s.Status, s.Rule)
}
