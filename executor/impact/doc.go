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
// the bundle in force then set.
//
// # What a replay counts
//
// Changed are the decisions whose outcome flips, with the sum of their
// calls' amounts (integer cents; a call without an amount adds zero), per
// group and in all (Report.ChangedAmount): the money that a loosening
// would let through without a person, or that a tightening would stop.
// RuleChanged are the decisions whose outcome stays while the rule that
// decides it changes (a REQUIRE_APPROVAL by R7 that would be one by R13):
// no money moves otherwise, but the reason a rep and a lead read does,
// and a rule that shadows another is visible before it ships.
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
