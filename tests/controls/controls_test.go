package controls_test

import (
	"context"
	"strings"
	"testing"

	"github.com/countersign/countersign/cmd/scenario/demo"
	"github.com/countersign/countersign/executor/credential"
	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// run runs c on a fresh stack under controls; a scenario that cannot run
// stops the test (it proves nothing either way).
func run(ctx context.Context, t *testing.T, c demo.Check, controls engine.Controls) demo.Outcome {
	t.Helper()
	o, err := c.Run(ctx, t.TempDir(), controls)
	if err != nil {
		t.Fatalf("%s could not run: %v", c.Test, err)
	}
	return o
}

// TestControlRemovalMatrix runs the matrix with each stack's store in
// bbolt, as one sidecar keeps it, and in PostgreSQL, as a fleet does.
func TestControlRemovalMatrix(t *testing.T) {
	t.Run("bbolt", func(t *testing.T) { controlMatrix(t.Context(), t) })
	t.Run("postgres", func(t *testing.T) {
		kek, err := credential.NewKeyEncryptionKey()
		if err != nil {
			t.Fatal(err)
		}
		b := &demo.Backend{NewDatabase: pgtest.Databases(t), KeyEncryptionKey: kek}
		controlMatrix(demo.WithBackend(t.Context(), b), t)
	})
}

// controlMatrix asserts, for every row, designed = pass and (where the row
// has a switch) removed = FAIL, and that each layered control removed
// alone still passes. Rows run in parallel, each on its own directories,
// databases and loopback ports; the table is logged at the end.
func controlMatrix(ctx context.Context, t *testing.T) {
	checks := demo.Checks()
	rows := make([]demo.Row, len(checks))
	layers := make([][]demo.Layer, len(checks))
	t.Run("row", func(t *testing.T) {
		for i, c := range checks {
			t.Run(c.Test, func(t *testing.T) {
				t.Parallel()
				row := demo.Row{Test: c.Test, RemovedControls: c.Removes}
				row.Designed = run(ctx, t, c, engine.DefaultControls())
				if !row.Designed.Pass {
					t.Errorf("designed: FAIL (%s); the designed system must hold the invariant", row.Designed.Evidence)
				}
				if len(c.Removes) > 0 {
					o := run(ctx, t, c, demo.Without(c.Removes...))
					row.Removed = &o
					if o.Pass {
						t.Errorf("with %v removed the test still passes (%s): the removal goes undetected", c.Removes, o.Evidence)
					}
				}
				for _, l := range c.Layers {
					o := run(ctx, t, c, demo.Without(l))
					layers[i] = append(layers[i], demo.Layer{Test: c.Test, Removed: l, Outcome: o})
					if !o.Pass {
						t.Errorf("with only %s removed the test fails (%s): the other layer should still catch it", l, o.Evidence)
					}
				}
				rows[i] = row
				t.Logf("%s\n%s\n  evidence: %s", demo.MatrixHeader(), row.Line(), row.Evidence())
				if len(layers[i]) > 0 {
					t.Logf("layering: %s", demo.LayeringLine(layers[i]))
				}
			})
		}
	})
	if t.Failed() {
		return
	}
	m := demo.Matrix{Rows: rows}
	for _, l := range layers {
		m.Layering = append(m.Layering, l...)
	}
	if p := m.Problems(); len(p) > 0 {
		t.Errorf("the matrix does not prove its claim: %v", p)
	}
	var b strings.Builder
	if err := m.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", b.String())
}

// TestEveryControlIsRemovedSomewhere: a control that no row removes is a
// control no test shows to be load-bearing.
func TestEveryControlIsRemovedSomewhere(t *testing.T) {
	removed := map[demo.Control]bool{}
	for _, c := range demo.Checks() {
		for _, x := range c.Removes {
			removed[x] = true
		}
	}
	for _, c := range demo.AllControls() {
		if !removed[c] {
			t.Errorf("no row of the matrix removes %s", c)
		}
	}
}

// TestNotApplicableRows: the rows without a switch are exactly the two the
// design names, and they must still pass on the designed system (asserted
// in TestControlRemovalMatrix).
func TestNotApplicableRows(t *testing.T) {
	var na []string
	for _, c := range demo.Checks() {
		if len(c.Removes) == 0 {
			na = append(na, c.Test)
		}
	}
	want := []string{"approval arrives after a restart", "approver authority rules"}
	if strings.Join(na, "|") != strings.Join(want, "|") {
		t.Errorf("n/a rows %q, want %q", na, want)
	}
}
