package demo_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/countersign/countersign/cmd/scenario/demo"
	"github.com/countersign/countersign/executor/engine"
)

// Each control name turns off exactly one field of engine.Controls, and
// every field has a name.
func TestWithoutRemovesExactlyOne(t *testing.T) {
	all := demo.AllControls()
	if n := reflect.TypeFor[engine.Controls]().NumField(); n != len(all) {
		t.Fatalf("engine.Controls has %d fields, AllControls %d names", n, len(all))
	}
	seen := map[int]demo.Control{}
	for _, c := range all {
		v := reflect.ValueOf(demo.Without(c))
		off := -1
		for i := range v.NumField() {
			if !v.Field(i).Bool() {
				if off >= 0 {
					t.Fatalf("%s turns off more than one field", c)
				}
				off = i
			}
		}
		if off < 0 {
			t.Fatalf("%s turns nothing off", c)
		}
		if prev, dup := seen[off]; dup {
			t.Fatalf("%s and %s turn off the same field", c, prev)
		}
		seen[off] = c
	}
	if demo.Without() != engine.DefaultControls() {
		t.Error("Without() is not the designed system")
	}
}

// Problems catches each way the matrix could claim more than it shows.
func TestMatrixProblems(t *testing.T) {
	pass, fail := demo.Outcome{Pass: true, Evidence: "1 entry"}, demo.Outcome{Evidence: "2 entries"}
	row := func(designed demo.Outcome, removed *demo.Outcome) demo.Row {
		return demo.Row{Test: "t", Designed: designed, Removed: removed, RemovedControls: []demo.Control{demo.WriteAhead}}
	}
	for _, tc := range []struct {
		name string
		m    demo.Matrix
		want string
	}{
		{"honest", demo.Matrix{Rows: []demo.Row{row(pass, &fail), row(pass, nil)},
			Layering: []demo.Layer{{Test: "t", Removed: demo.RunDedupe, Outcome: pass}}}, ""},
		{"designed fails", demo.Matrix{Rows: []demo.Row{row(fail, &fail)}}, "fails on the designed system"},
		{"removal undetected", demo.Matrix{Rows: []demo.Row{row(pass, &pass)}}, "does not detect the removal"},
		{"n/a row fails", demo.Matrix{Rows: []demo.Row{row(fail, nil)}}, "fails on the designed system"},
		{"layer fails alone", demo.Matrix{Rows: []demo.Row{row(pass, &fail)},
			Layering: []demo.Layer{{Test: "t", Removed: demo.RunDedupe, Outcome: fail}}}, "fails with only run_dedupe removed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := strings.Join(tc.m.Problems(), "\n")
			if (tc.want == "") != (p == "") || !strings.Contains(p, tc.want) {
				t.Errorf("problems %q, want one containing %q", p, tc.want)
			}
			var b strings.Builder
			if err := tc.m.WriteText(&b); err != nil {
				t.Fatal(err)
			}
			if shown := strings.Contains(b.String(), "PROBLEMS"); shown != (tc.want != "") {
				t.Errorf("PROBLEMS shown %v in:\n%s", shown, b.String())
			}
		})
	}
}

func TestRowLine(t *testing.T) {
	r := demo.Row{Test: "lost response, retried", Designed: demo.Outcome{Pass: true},
		Removed: &demo.Outcome{}, RemovedControls: []demo.Control{demo.IdempotencyKeys}}
	got := strings.Fields(r.Line())
	want := []string{"lost", "response,", "retried", "pass", "FAIL", "idempotency_keys=false"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("line %q", r.Line())
	}
	na := demo.Row{Test: "approver authority rules", Designed: demo.Outcome{Pass: true}}
	if f := strings.Fields(na.Line()); f[len(f)-2] != "n/a" || f[len(f)-1] != "-" {
		t.Errorf("n/a line %q", na.Line())
	}
}
