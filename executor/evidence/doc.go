// Package evidence answers, for one step of one workflow, the questions a
// compliance reviewer asks of a refund, from the records that exist and
// from nothing else (GET /v1/workflows/{id}/steps/{n}/evidence and
// countersign audit explain):
//
//	question              from
//	who asked             the workflow (rep, ticket, agent version) and,
//	                      for an effect, the agent the system of record
//	                      verified (its entry's agent)
//	which policy          the decision log's last decision on the step:
//	                      decision id, revision, digest, rule, the input
//	who approved          the step's approval: requester, approver, when,
//	                      comment, the call hash it was bound to
//	what was paid         the step's result: the ledger's entry, amount
//	proven how            the audit records of the step, with their chain
//	                      positions, and audit.Verify's verdict on them
//
// # The verdict
//
// The records are proven when each of them is in the chain and the chain
// verifies from its first record through the last of them (audit.Verify:
// every link holds and every hash recomputes). A break after them does not
// unsettle them: the links up to them still hold, and the verdict names
// the break all the same. A step whose records a fleet has not chained
// yet (audit.Sequence) is not proven yet: the verdict says how many wait.
//
// # What it costs
//
// An answer reads the whole chain twice: once for the positions of the
// step's records (one read transaction with the workflow, the step, its
// decisions and approval), once for audit.Verify's verdict, which is what
// GET /v1/audit/verify reads. Positions are counts from the chain's
// start, and a verdict through a record needs every link before it: an
// index by workflow would save the first walk, not the second.
//
// The chain alone does not show a whole chain rewritten by whoever holds
// the store; what anchors it outside is a signed checkpoint. The answer
// names the first one that covers every record of the step (Checkpoint),
// and whether the chain matches it with a signature the store's keys
// verify (Anchored); a reviewer holding a copy of that checkpoint from
// the sink (--audit-checkpoint-url) checks it against their copy.
package evidence
