// Package dispatch is the engine's way to the systems of record: HTTP
// clients of the ledger and the order system, and the [Dispatcher], which
// applies countersign's retry rules to them.
//
// # The rules
//
// Every attempt carries its own actor token, minted just before it is sent
// (a [Minter]; in production the credential Authority), so a retry never
// reuses a token and a raised epoch applies to the very next attempt. No
// token outlives the call's NotAfter (the step's token deadline, which the
// engine records before it dispatches): the engine knows when the last
// request it may have sent can no longer land.
//
//   - Ledger calls (refunds, reversals) send the caller's stable
//     Idempotency-Key. When the answer is lost (the request went out and no
//     answer came back: EOF, reset, timeout), the call is retried ONCE with
//     the same key and a fresh token; the ledger either makes the entry or
//     replays the one the lost attempt made. Still no answer:
//     [ErrOutcomeUnknown]. A call without a key is never retried.
//   - Order-system calls have no key: one attempt, and a lost answer is
//     [ErrOutcomeUnknown]. A reship carries the caller's reference (in the
//     body and bound in its token), and [Dispatcher.ShipmentByReference]
//     finds the shipment it made, if any; the engine resolves a lost
//     answer by it, or hands it to a person.
//
// A token names the one request it is for: its call binding, the
// Idempotency-Key the attempt sends (claim key) and the reshipment's
// reference (claim ref). The receivers accept each token once, so a retry
// needs, and gets, a token of its own.
//
// # Errors
//
// Errors are classified so the engine can act on them with errors.As and
// errors.Is:
//
//   - *[Refused]: the system of record answered 4xx (a token it does not
//     accept, a conflict, an unknown order). Nothing happened; never
//     retried. It carries the status and the receiver's code and message.
//   - *[Transient]: nothing happened: the connection could not be made, or
//     the system answered 5xx before any effect. Safe to try later.
//   - [ErrOutcomeUnknown]: the request was sent and no usable answer came
//     back; the effect may or may not have happened.
//
// A retry that is refused or cannot connect after a lost attempt is still
// ErrOutcomeUnknown: the first attempt may have taken effect.
//
// # The lost-response test switch
//
// Options.FreshKeyPerAttempt (or Call.FreshKeyPerAttempt) sends a new key on
// every attempt. It exists only so that tests can remove the idempotency
// control and watch a lost response become two refunds; nothing reachable
// from configuration sets it.
//
// # Why the request body is not replayable
//
// Go's http.Transport silently re-sends a request whose connection dies
// before the answer when it deems the request replayable, and a request
// with an Idempotency-Key header counts as replayable. That would hide a
// lost response from the Dispatcher (and, with the test switch, replay a
// key the test meant to be fresh). The clients therefore send bodies that
// the transport cannot rewind, so every retry is the Dispatcher's own,
// counted and logged.
package dispatch
