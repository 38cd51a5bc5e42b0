//go:build failpoints

// This file is compiled only into a binary built with -tags failpoints, the
// one the crash tests in tests/crash run. It reads two environment
// variables, which the default build never looks at:
//
//	COUNTERSIGN_FAILPOINT=<point>            the process kills itself with SIGKILL
//	                                         when the engine first reaches <point>
//	                                         (after_open, before_dispatch, after_dispatch, after_record)
//	COUNTERSIGN_REMOVE_CONTROLS=a,b          the engine runs with those controls off
//
// A self-inflicted SIGKILL lands exactly at the point: no deferred function,
// no bbolt commit and no HTTP answer runs after it, as with a power cut or
// the OOM killer.

package main

import (
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"syscall"

	"github.com/countersign/countersign/executor/engine"
)

const (
	envFailpoint      = "COUNTERSIGN_FAILPOINT"
	envRemoveControls = "COUNTERSIGN_REMOVE_CONTROLS"
)

// failpoints are the points the engine calls its hook at.
var failpoints = []string{"after_open", "before_dispatch", "after_dispatch", "after_record"}

// failpointHook returns the engine's failpoint hook armed by
// COUNTERSIGN_FAILPOINT, or nil when the variable is unset.
func failpointHook(log *slog.Logger) (func(string) error, error) {
	point := strings.TrimSpace(os.Getenv(envFailpoint))
	if point == "" {
		return nil, nil
	}
	if !slices.Contains(failpoints, point) {
		return nil, fmt.Errorf("%s=%q: unknown failpoint; use one of %s", envFailpoint, point, strings.Join(failpoints, ", "))
	}
	log.Warn("failpoint armed: the process kills itself with SIGKILL when the engine reaches it", "point", point)
	return func(reached string) error {
		if reached != point {
			return nil
		}
		fmt.Fprintf(os.Stderr, "countersign: failpoint %s reached: SIGKILL\n", point)
		if err := syscall.Kill(os.Getpid(), syscall.SIGKILL); err != nil {
			return fmt.Errorf("failpoint %s: kill: %w: %w", point, err, engine.ErrCrashed)
		}
		// SIGKILL cannot be caught; park this goroutine until the kernel
		// ends the process, so nothing after the point runs.
		select {}
	}, nil
}

// removedControls returns the engine's controls with those named in
// COUNTERSIGN_REMOVE_CONTROLS turned off, or nil (the defaults) when the
// variable is unset.
func removedControls(log *slog.Logger) (*engine.Controls, error) {
	list := strings.TrimSpace(os.Getenv(envRemoveControls))
	if list == "" {
		return nil, nil
	}
	c := engine.DefaultControls()
	switches := map[string]*bool{
		"idempotency_keys":          &c.IdempotencyKeys,
		"run_dedupe":                &c.RunDedupe,
		"write_ahead":               &c.WriteAhead,
		"bind_approval":             &c.BindApproval,
		"cumulative":                &c.Cumulative,
		"strict_schema":             &c.StrictSchema,
		"downstream_ceiling":        &c.DownstreamCeiling,
		"check_switch_at_execution": &c.CheckSwitchAtExecution,
		"reference_keys":            &c.ReferenceKeys,
	}
	var removed, unknown []string
	for name := range strings.SplitSeq(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		sw, ok := switches[name]
		if !ok {
			unknown = append(unknown, name)
			continue
		}
		*sw = false
		removed = append(removed, name)
	}
	if len(unknown) > 0 {
		names := make([]string, 0, len(switches))
		for n := range switches {
			names = append(names, n)
		}
		slices.Sort(names)
		return nil, fmt.Errorf("%s: unknown control(s) %s; known: %s", envRemoveControls,
			strings.Join(unknown, ", "), strings.Join(names, ", "))
	}
	log.Warn("controls removed for a test run: this is not the designed system", "removed", removed)
	return &c, nil
}
