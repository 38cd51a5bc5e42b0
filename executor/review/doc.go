// Package review shows a second operator what a candidate policy bundle
// would change before they approve it: how it differs from the bundle it
// would replace, and what it would newly let through.
//
// # What a review holds
//
// New compares a candidate with its reference (the active bundle, or the
// baseline release when none is active):
//
//   - SecondOperator: why the candidate is not a pure tightening
//     (policy.Compare), one reason a line; empty when it may go live on
//     one operator.
//   - Diff: each Rego file that differs, as a unified diff (diff -u,
//     three lines of context), tests included; PolicyChanged tells a
//     change of rules from one of layout or comments.
//   - DataDiff: each value of the data that differs, by its path
//     (data.countersign.limits.refund_auto), old → new, and whether a
//     limit moved the tightening or the loosening way.
//   - NewAllowances: the inputs on which the candidate is more
//     permissive (a call ALLOW over REQUIRE_APPROVAL over DENY, an
//     approval allowed over refused), counted, with examples.
//
// The decision-log replay (package impact) is the fourth thing a reviewer
// reads; the release service keeps it beside the review.
//
// # Why generated inputs
//
// A replay of the decision log only tells what the candidate would have
// decided on the calls that happened. A rule aimed at a rep and an order
// nobody has asked about yet (ALLOW refunds of O-1002 by rep-ana from
// $450) flips no logged decision, and the gate's boundary cases use their
// own reps and orders. So the review asks both bundles about inputs built
// from what the two bundles themselves mention, the way AWS IAM Access
// Analyzer's check-no-new-access judges a change by what it newly
// permits: every string and whole number literal of either bundle's rules
// and data (ids, regions, tools, amounts and each amount a cent either
// side), put where each fits into the gate's boundary cases and a sample
// of recent logged inputs (generate.go says how). Inputs the literals
// cannot reach are not tried: a review is evidence for a person, not a
// proof, and the second operator is still the control.
//
// # Bounds
//
// At most MaxCallInputs call inputs and MaxApproverInputs approver inputs
// are evaluated, within Budget: each by the candidate, and by the
// reference when the candidate lets it through (a DENY is never more
// permissive). The same bundles and logged inputs always give the same
// inputs, in the same order, and the same review. A unified diff is
// Myers' line diff (github.com/sergi/go-diff, which OPA already links for
// opa fmt --diff), without its timeout, so it does not depend on the
// machine either. The diffs together stop at MaxDiffBytes. A bundle that
// loops stops the review (Allowances.Incomplete says so), not the
// activation: whether a second operator is needed is policy.Compare's
// answer, never the review's.
package review
