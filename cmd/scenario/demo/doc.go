// Package demo runs countersign's proofs against the real pieces: every
// scenario starts its own devstack (the ledger and the order system over
// HTTP, the dev identity provider, the store, OPA with a bundle, the engine
// and the sidecar) in a directory of its own, drives it as an agent, a
// lead and an operator would, and counts what happened in the systems of
// record, never in the engine's own records.
//
// # Sections
//
// `countersign demo` prints them in this order, and the tests under
// tests/controls assert on the same functions:
//
//   - RunPolicyDecisions: six refund requests and the rule that decided each.
//   - RunApprovalAuthority: five people who may not approve a $400 refund,
//     each refused by its own rule; the right lead comes 1000 simulated
//     seconds too late.
//   - RunBinding: a $120 approval cannot carry a step amended to $450.
//   - RunGate: the boundary cases of the limits in force against bundles p1 and p2, and p2
//     offered to a running sidecar.
//   - RunCrashMatrix: a refund and a reshipment crashed at each failpoint,
//     resumed by a new stack over the same directory, with and without
//     the write-ahead record (and the order system's reference key,
//     which alone would catch the second reshipment).
//   - RunReconciliation: one planted example of every difference class,
//     the report and its repair classes, and the report after a restart.
//   - RunControls: the control-removal matrix.
//
// # The control-removal matrix
//
// A test that passes whether or not its control is there tests nothing.
// Each Check runs a scenario twice: on the designed system, where its
// invariant must hold, and with the controls it names removed (Without),
// where the invariant must break. Controls that back each other up (the
// run-level dedupe and the ledger's idempotency key) are removed together,
// and each is also removed alone to show that either layer is enough.
// Matrix.Problems lists every way the matrix fails to prove its claim.
//
// Crashes are in process here: the engine's failpoint returns
// engine.ErrCrashed and the stack is closed where a killed process would
// stop. The crash tests with real process kills live under tests/crash.
//
// Every scenario runs on a simulated clock, so an approval can expire
// without the demo waiting fifteen minutes.
package demo
