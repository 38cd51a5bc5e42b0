package bench

import "errors"

// Errors of Options.Validate, joined when there are several.
var (
	// ErrOptions is wrapped by every problem Validate reports.
	ErrOptions = errors.New("bench: invalid options")
	// ErrNotLoopback: the bench drives only a sidecar on this machine.
	ErrNotLoopback = errors.New("bench: the sidecar must listen on loopback (127.0.0.1, ::1 or localhost)")
	// ErrBaselineOutOfProcess: the glue mints tokens with the stack's own
	// credential authority and loads its active bundle, which only an
	// in-process stack hands over.
	ErrBaselineOutOfProcess = errors.New("bench: --baseline needs the in-process stack; drop --sidecar or --baseline")
)
