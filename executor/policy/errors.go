package policy

import (
	"errors"
	"fmt"
	"strings"
)

// Errors of the policy engine. Every error that stops a decision means the
// caller must not act on the call: the engine never answers Allow with an
// error, and a caller that gets an error treats the call as denied.
var (
	// ErrNoBundle means no bundle is active yet, so nothing can be decided.
	// The sidecar answers 503 until one is.
	ErrNoBundle = errors.New("policy: no active bundle")

	// ErrUnexpectedResult means the active bundle answered with a result
	// this engine does not understand: undefined, several results, or a
	// shape other than the documented one. The call fails closed.
	ErrUnexpectedResult = errors.New("policy: unexpected result from the bundle")

	// ErrInvalidBundle means a bundle could not be read: not a gzip'd tar,
	// an unsafe path, Rego that does not compile, a missing revision or
	// limits that are missing or not whole positive numbers.
	ErrInvalidBundle = errors.New("policy: invalid bundle")

	// ErrBundleTooLarge means a bundle exceeds MaxArchiveBytes,
	// MaxUnpackedBytes or MaxFiles. It is refused before it is parsed.
	ErrBundleTooLarge = errors.New("policy: bundle too large")

	// ErrGateFailed means a candidate changed a limit it does not declare,
	// or failed the gate's cases or its own Rego tests, and was not
	// activated. The error is a *GateError that carries the Report.
	ErrGateFailed = errors.New("policy: bundle failed the gate")

	// ErrForbiddenBuiltin means a bundle calls a built-in function outside
	// the capabilities allowlist (Capabilities): one that reaches the
	// network, reads the clock or randomness, or writes outside. The error
	// is a *ForbiddenBuiltinError naming the built-in and the file. Such a
	// bundle is refused on every path, break-glass included, and recorded
	// as rejected.
	ErrForbiddenBuiltin = errors.New("policy: bundle uses a forbidden built-in")

	// ErrNoTests means a candidate ships no Rego tests of its own: the gate
	// refuses it, and records it as rejected, as it does a failing one.
	ErrNoTests = errors.New("policy: bundle has no Rego tests")

	// ErrTimeout means an evaluation ran past its deadline (Options.Timeout)
	// and was stopped. The call fails closed; nothing was decided, so the
	// caller may try again.
	ErrTimeout = errors.New("policy: evaluation exceeded its deadline")

	// ErrSignatureInvalid means an engine that requires signed bundles
	// (Options.Verifier) was given one without a .signatures.json, signed
	// by another key or key id, or whose files differ from those signed.
	// It is refused on every path, break-glass included, before the gate,
	// and not recorded: nobody known offered it.
	ErrSignatureInvalid = errors.New("policy: bundle signature invalid")

	// ErrReasonRequired means a break-glass activation came without a
	// written reason.
	ErrReasonRequired = errors.New("policy: break-glass activation needs a reason")
)

// ErrSameOperator means the second operator of a change that needs two is
// the one who proposed it.
var ErrSameOperator = errors.New("policy: the operator who proposed a change cannot also approve it; another operator must")

// ErrAwaitingSecondOperator matches an *AwaitingError.
var ErrAwaitingSecondOperator = errors.New("policy: the bundle awaits a second operator")

// AwaitingError is the outcome of an activation that needs a second
// operator: the bundle is recorded as awaiting one, nothing changed yet.
type AwaitingError struct {
	Revision, Digest string
	// Loosens are the declared limit changes that loosen.
	Loosens []LimitChange
	// Reasons say why it is not a pure tightening of the bundle it
	// replaces (Comparison.Reasons), one a line.
	Reasons    []string
	BreakGlass bool
}

func (e *AwaitingError) Error() string {
	why := "it is not a pure tightening of the active bundle: " + strings.Join(e.Reasons, "; ")
	switch {
	case e.BreakGlass:
		why = "it breaks the glass"
	case len(e.Reasons) == 0:
		why = fmt.Sprintf("it loosens %d limit(s)", len(e.Loosens))
	}
	return fmt.Sprintf("%v: revision %q (%s): %s; another operator approves it with POST /v1/bundles/%s/approve",
		ErrAwaitingSecondOperator, e.Revision, e.Digest, why, e.Digest)
}

// Unwrap makes errors.Is(err, ErrAwaitingSecondOperator) hold.
func (e *AwaitingError) Unwrap() error { return ErrAwaitingSecondOperator }

// GateError is the error of an activation the gate refused. It matches
// ErrGateFailed with errors.Is; errors.As gives the Report with every failure.
type GateError struct {
	Report Report
}

func (e *GateError) Error() string {
	return fmt.Sprintf("%v: revision %q: %d undeclared limit change(s), %d case(s) and %d Rego test(s) failed",
		ErrGateFailed, e.Report.Revision, len(e.Report.LimitFailures), len(e.Report.FailedCases()), len(e.Report.TestFailures))
}

// Unwrap makes errors.Is(err, ErrGateFailed) hold.
func (e *GateError) Unwrap() error { return ErrGateFailed }

// ForbiddenBuiltinError is the error of a bundle that calls a built-in the
// capabilities allowlist leaves out. It matches ErrForbiddenBuiltin.
type ForbiddenBuiltinError struct {
	Builtin string // "http.send"
	File    string // the module's path in the bundle, "/call/call.rego"
	Row     int
}

func (e *ForbiddenBuiltinError) Error() string {
	return fmt.Sprintf("%v: %s in %s:%d; policies may not reach the network, the clock or randomness: "+
		"take facts and the time from the input and remove the call", ErrForbiddenBuiltin, e.Builtin, e.File, e.Row)
}

// Unwrap makes errors.Is(err, ErrForbiddenBuiltin) hold.
func (e *ForbiddenBuiltinError) Unwrap() error { return ErrForbiddenBuiltin }
