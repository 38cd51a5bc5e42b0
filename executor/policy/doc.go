// Package policy is countersign's policy engine: OPA embedded in process,
// the bundles it evaluates, and the gate every bundle passes before it
// decides anything.
//
// # Decisions
//
// A bundle holds two Rego packages (see rego/ at the top of the module):
// countersign.call decides a tool call (Allow, Deny or RequireApproval,
// with the rule that matched) and countersign.approver decides whether a
// person may approve a held call (allowed, or a Refusal code). The limits
// are the bundle's data, in integer cents.
//
// Engine.Decide and Engine.CheckApprover evaluate queries prepared once
// per bundle, with an input built directly as an OPA value and the
// engine's clock as the evaluation time. The result is decoded into a
// typed struct at this boundary. Anything unexpected (no active bundle, an
// undefined result, a shape other than the documented one) is an error,
// never an Allow: callers treat every error as a denial.
//
// # Bundles
//
// LoadDir, LoadFS, LoadFile and LoadArchive read a standard OPA bundle
// (.manifest with a revision and rego_version 1, data.json, .rego files).
// Uploads are bounded (MaxArchiveBytes, MaxUnpackedBytes, MaxFiles) and
// their paths checked before OPA parses them. A bundle's digest is the
// sha256 of its .tar.gz; a directory is first packed by Build, which is
// deterministic, so the same files always have the same digest.
// *_test.rego files are left out of the compiled policy and kept for the
// gate. Source lays out a new revision from the one Rego source (rego/)
// and a data file; the released revisions live in package bundles.
//
// # Limits and their changes
//
// A bundle owns its limits (data.countersign.limits). A bundle whose
// limits differ from the active bundle's declares each change in its
// .manifest, metadata.limit_changes: [{"name", "from", "to"}], from the
// active bundle's value to its own (LimitChange). The limit table holds
// the eight limits, then the bounds of a run and the breaker's thresholds
// under "<object>.<member>" names (bounds.max_steps, bounds.max_spend,
// bounds.deadline_seconds, bounds.max_attempts, breaker.max_failures,
// breaker.window_seconds): a change of one of those that both bundles set
// is declared the same way; one that only one of them sets is a data key
// added or removed (see below), not a change. A declaration that cannot
// be right whatever is active (an unknown name, one the bundle does not
// set, to other than the bundle's value, no change, twice) is
// ErrInvalidBundle at load. With no bundle active, the reference is the
// embedded release BaselineRevision (Baseline, BaselineLimits).
// Report.Loosens names the declared changes that let more through
// (LimitChange.Loosens says which way each number loosens: up, but for the
// windows a cap or the breaker counts over, which loosen down).
//
// # Who may loosen
//
// Only a pure tightening of the bundle it replaces goes live on one
// operator (Compare, tighten.go): its policy modules parse to the same
// rules (layout and comments aside; test modules may differ), its data
// has the same keys, and every value that differs is a number of the
// limit table moved the tightening way. Anything else (a rule, an approver
// rule, a module added, a data key added or removed, a list, a mode, a
// loosened limit) waits for a second operator, as a break-glass
// activation does, and the AwaitingError says why, one reason a line.
// Options.LimitOnlyLoosening removes the control, for the tests that show
// it matters: then only a declared limit change that loosens needs two.
//
// # Bounds of a run
//
// Beside its limits a bundle's data may bound every workflow
// (data.countersign.bounds: {"max_steps", "max_spend", "deadline_seconds",
// "max_attempts"}, each a whole number above zero, each optional; any
// problem refuses the bundle at load). An absent member is 200 steps, the
// bundle's rep_daily in cents, 86400 seconds from the workflow's creation
// and 10 attempts per step (DefaultBounds); the embedded releases carry
// none. A workflow may narrow them when it opens. The engine sends where a
// call stands against them as input.workflow (Run), and the call rules
// B1-B4 deny on it; the engine applies the same bounds after any bundle's
// answer, so a bundle without those rules is bounded too.
//
// # The gate
//
// Check runs a candidate's own Rego tests with OPA's tester, compares its
// limits with the reference, and runs a suite of cases that ships in this
// package, not in bundles (cases.go): a bundle author can loosen a limit
// and write tests that pass, but cannot change the cases. The boundary
// cases are derived from the limits in force: the candidate's when it
// declares each of its changes, otherwise the reference's, so an
// undeclared change fails as LimitChangeUndeclared and the cases then show
// what it breaks. The invariant cases hold for any limits. The Report
// lists every failure as (case, amount, expected, got). Engine.Activate
// checks against the active bundle, swaps a bundle in atomically only if
// it passes (and, when it is not a pure tightening, a second operator
// approved it), records every attempt in a History, and leaves the active
// bundle in force otherwise. A break-glass activation skips the gate with
// a written reason and is recorded as such. CaseInputs and
// ApproverCaseInputs give the cases' inputs to a reviewer that generates
// more from them (package review).
//
// # Signatures
//
// Bundles may be signed in OPA's format (.signatures.json; see
// signature.go): Signer signs as `opa build --signing-key` does, and an
// engine with Options.Verifier activates and restores only bundles whose
// signature its key verifies. Without a Verifier no signature is required
// and a signed bundle loads with its signature unchecked.
//
// # What a bundle may not do
//
// A decision depends only on its input and the bundle's data. Every
// compile of a bundle, its production queries and the gate's run of its
// tests, uses Capabilities: OPA's built-ins minus those that reach the
// network, read the clock or randomness, or write to the host (see
// capabilities.go for the list and why it is derived). The time a policy
// may use is the input's, which the engine fills from its clock: the
// approver policy reads input.now in unix seconds, the call policy
// input.now.rfc3339 and input.now.ns beside the order's placed_at and
// shipped_at (RFC 3339); the gate's cases carry a fixed now, and a replay
// the one it recorded. Refusals, in the order they are checked:
//
//	refusal                      when                               recorded  break glass
//	ErrBundleTooLarge            over MaxArchiveBytes, MaxUnpacked- no        -
//	                             Bytes (the whole tar stream) or
//	                             MaxFiles entries, before parsing
//	ErrInvalidBundle             unsafe path, bad revision (not     no        -
//	                             ^[A-Za-z0-9._-]{1,64}$, or shaped
//	                             like a token), Rego that does not
//	                             compile, bad limits or limit
//	                             change declarations
//	ErrSignatureInvalid          Options.Verifier is set and does   no        refused too
//	                             not verify the bundle's signature
//	*ForbiddenBuiltinError       a rule or a test calls a built-in  rejected  refused too
//	                             outside Capabilities
//	ErrNoTests                   no Rego test ran                   rejected  skipped
//	*GateError                   an undeclared limit change, a      rejected  skipped
//	                             failed case or Rego test
//
// LoadArchive loads a bundle whose rules call a forbidden built-in (marked,
// see Bundle.Forbidden) so that Activate can record the refusal and name
// the call; no engine with the allowlist activates or restores it.
// Options.UnrestrictedBuiltins removes the allowlist, for the tests that
// prove it matters; nothing else sets it.
//
// # Deadlines
//
// Every evaluation runs under Options.Timeout (DefaultTimeout, 100 ms):
// each decision and each approver check; the gate's cases get at
// least a second, so that a busy host does not fail a sound bundle. A
// bundle that loops is stopped (OPA checks for cancellation in every
// expression and inside numbers.range) and the call fails closed with
// ErrTimeout; nothing is decided, so the caller may retry. The gate gives
// each of a bundle's own Rego tests a second and all of them ten seconds
// (gate.go says why); a test or a case that runs out fails the gate by name.
package policy
