//go:build failpoints

package main

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/countersign/countersign/executor/engine"
)

func TestRemovedControlsFromEnv(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	for _, tc := range []struct {
		env     string
		want    func(*engine.Controls)
		wantErr string
	}{
		{env: "", want: nil},
		{env: "write_ahead", want: func(c *engine.Controls) { c.WriteAhead = false }},
		{env: " run_dedupe , idempotency_keys,", want: func(c *engine.Controls) { c.RunDedupe, c.IdempotencyKeys = false, false }},
		{env: "check_switch_at_execution,strict_schema", want: func(c *engine.Controls) {
			c.CheckSwitchAtExecution, c.StrictSchema = false, false
		}},
		{env: "write_ahead,writeahead", wantErr: "unknown control(s) writeahead"},
	} {
		t.Run(tc.env, func(t *testing.T) {
			t.Setenv("COUNTERSIGN_REMOVE_CONTROLS", tc.env)
			got, err := removedControls(log)
			switch {
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one naming %q", err, tc.wantErr)
				}
				return
			case err != nil:
				t.Fatal(err)
			case tc.want == nil:
				if got != nil {
					t.Fatalf("controls %+v, want nil (the defaults)", *got)
				}
				return
			}
			want := engine.DefaultControls()
			tc.want(&want)
			if got == nil || *got != want {
				t.Fatalf("controls %+v, want %+v", got, want)
			}
		})
	}
}

func TestFailpointHookFromEnv(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	t.Setenv("COUNTERSIGN_FAILPOINT", "")
	if fail, err := failpointHook(log); fail != nil || err != nil {
		t.Fatalf("unset: (%v, %v), want (nil, nil)", fail != nil, err)
	}
	t.Setenv("COUNTERSIGN_FAILPOINT", "mid_dispatch")
	if _, err := failpointHook(log); err == nil || !strings.Contains(err.Error(), "after_open, before_dispatch, after_dispatch, after_record") {
		t.Fatalf("unknown point: err = %v, want one listing the points", err)
	}
	// Armed at one point, the hook lets the others pass (reaching the armed
	// point kills the process; tests/crash exercises that).
	t.Setenv("COUNTERSIGN_FAILPOINT", "after_record")
	fail, err := failpointHook(log)
	if err != nil || fail == nil {
		t.Fatalf("armed: (%v, %v)", fail != nil, err)
	}
	for _, p := range []string{"before_dispatch", "after_dispatch"} {
		if err := fail(p); err != nil {
			t.Errorf("fail(%q) = %v, want nil", p, err)
		}
	}
}
