//go:build !failpoints

package main

import (
	"log/slog"

	"github.com/countersign/countersign/executor/engine"
)

// failpointHook is nil in the default build: the engine's failpoints are
// inert and no environment variable is read. Build with -tags failpoints
// (tests/crash does) to arm them.
func failpointHook(*slog.Logger) (func(string) error, error) { return nil, nil }

// removedControls is nil in the default build, so the engine runs with
// engine.DefaultControls: no flag, file or variable can turn a control off.
func removedControls(*slog.Logger) (*engine.Controls, error) { return nil, nil }
