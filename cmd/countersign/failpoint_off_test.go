//go:build !failpoints

package main

import (
	"log/slog"
	"testing"
)

// The default build must not arm a failpoint or remove a control whatever
// the environment says: the values below would be errors if they were read.
func TestDefaultBuildIgnoresFailpointEnv(t *testing.T) {
	t.Setenv("COUNTERSIGN_FAILPOINT", "after_dispatch")
	t.Setenv("COUNTERSIGN_REMOVE_CONTROLS", "write_ahead,idempotency_keys,no_such_control")
	log := slog.New(slog.DiscardHandler)
	fail, err := failpointHook(log)
	if fail != nil || err != nil {
		t.Errorf("failpointHook = (%v, %v), want (nil, nil) in the default build", fail != nil, err)
	}
	controls, err := removedControls(log)
	if controls != nil || err != nil {
		t.Errorf("removedControls = (%+v, %v), want (nil, nil): the engine keeps DefaultControls", controls, err)
	}
}
