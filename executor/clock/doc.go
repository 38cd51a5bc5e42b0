// Package clock is the one way countersign is told the time: every
// component that reads "now" takes a [Clock] in its Options, and nil there
// means [Wall], the real clock. The drill, the demo and the tests pass
// executor/simclock's simulated clock instead, so a run is repeatable to
// the byte and the policy is evaluated at the same time the records are
// stamped with.
//
// The package is neither the engine nor the sidecar: it holds the interface
// and the real clock and nothing else, so the simulated systems of record
// under executor/sim, which import nothing of the engine or the sidecar,
// may import it as a real downstream system would import package time.
package clock
