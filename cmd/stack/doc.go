// Package stack is the production wiring of countersign: from Options it
// assembles, in this order, the store, the actor-token authority, the
// verifier of people's tokens, the audit log, the policy engine and its
// bundle, the metrics, the client of the systems of record, the step
// engine, reconciliation, the monitors and the sidecar's HTTP server, and
// serves until Close. `countersign serve` runs it; the dev stack
// (cmd/devstack) starts its simulators and then runs it too, so both paths
// share every step.
//
// # What it links
//
// Nothing of the simulators (executor/sim/...) or of the Quillfeather
// fixture (executor/fixture): the systems of record and the identity
// providers are URLs and key sets in Options, exactly as a real deployment
// sees them. TestProductionWiringLinksNoSimulator holds that with
// `go list -deps`.
//
// # Start-up order
//
// The data directory and the sidecar's address are taken first (Reserve),
// because they are what another process can hold: a second serve over the
// same directory, or on the same port, is told so in one line (a
// *StartError) before anything else starts. The dev stack reserves, starts
// its simulators against the reserved address's JWKS URL, and then calls
// Reservation.Start; serve calls Start, which does both.
//
// # Defaults
//
// Options documents each default; Validate reports every problem at once,
// so a person fixing a configuration sees the whole list, not one error per
// attempt.
package stack
