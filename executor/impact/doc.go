// Package impact replays the decision log against a candidate bundle
// before it is activated: each recorded decision's input, exactly as the
// policy evaluated it then, is evaluated again by the candidate, and the
// decisions that would come out otherwise are counted by what they were,
// what they would be and the candidate's rule that would decide them, with
// a few examples of each.
//
// # What a replay can tell
//
// A recorded input holds the facts as they stood at the decision: the
// order, the rep's delegation, and the totals (the order's refunds, the
// rep's rolling day, the agent's hour, the order's reships). A replay
// changes only the policy, so it answers "what would this bundle have
// decided on the same facts". It does not follow the consequences: an
// ALLOW that would have been a DENY still counts in the totals of the
// decisions after it, and the rolling windows were read over the periods
// the bundle in force then set. A change of rule that keeps the decision
// (a DENY by R3 that would be a DENY by R4) is not a change.
//
// Decisions logged before the log recorded inputs cannot be replayed; they
// are counted as skipped.
//
// # Use
//
// Read the recent decisions with store.Tx.LastDecisions (DefaultLast of
// them unless told otherwise) and pass them to Replay with the candidate,
// as `countersign bundle impact` does.
package impact
