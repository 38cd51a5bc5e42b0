// Package reconcile compares what the agent's records say happened with
// what the systems of record hold, and classifies every difference.
//
// # Why it exists
//
// A step's status is the agent's belief. A lost write, an adapter that
// records the wrong amount, a crash between the effect and its record, a
// clerk's manual entry or a policy release that drops the approval step all
// leave the agent's records and the world disagreeing, often silently. The
// job here trusts no status on its own: it reads every step, approval and
// workflow from the store, every ledger entry and every shipment, joins
// refund steps to ledger entries by idempotency key (step.Key == entry.Key)
// and counts reship steps against shipments per order.
//
// # The classes
//
// A Report always carries all eight classes, in this order:
//
//   - matched: a refund step that executed and a ledger entry under its key
//     with the same amount. Counted, not listed.
//   - agent_done_ledger_missing: the step is done, the ledger holds nothing
//     under its key (an acknowledged write that was lost).
//   - amount_mismatch: the step is done and the ledger holds its key with
//     another amount (an adapter bug).
//   - ledger_entry_without_step: a refund or external entry that no
//     executed step accounts for (a person's entry, or a lost agent record).
//     Reversals are explained by the entry they reverse and never appear.
//   - in_flight_ledger_has_it / in_flight_ledger_lacks_it: a refund step
//     left started or unknown (a crash, a lost answer), split by whether the
//     ledger already holds its key.
//   - refund_over_limit_without_approval: a refund above its auto limit
//     that executed with no used approval naming exactly that call, and
//     was not reversed. Its auto limit is that of the bundle whose
//     decision let it run (the decision log names it, the bundle history
//     holds it: release.Limits), never the active bundle's: a refund that
//     a since-rolled-back bundle allowed within its own limit is no
//     finding. A bundle's own limit counts only when the gate vouched for
//     it (it went live through the gate, never by breaking the glass);
//     otherwise, or when that bundle cannot be found, the refund is held
//     to the strictest limit known (Options.AutoLimit included) and the
//     finding says why, so a bundle with a wrong limit cannot hide its own
//     effects. A retroactive approval recorded by a lead explains the
//     refund (it is counted in Explained.Ratified).
//   - shipment_count_mismatch: an order whose shipments in the order system
//     differ in number from its reship steps that are done.
//
// A refund step is also "executed" when the ledger holds its key while the
// step is still in flight: the ledger is the reference, not the status.
// A refund whose ledger entry was reversed is explained and counted in
// Explained.Reversed, neither matched nor a finding; here too the ledger
// decides, so a compensated step whose entry shows no reversal still
// counts as matched (the refund itself agrees), and a compensated step is
// never an over-limit finding.
//
// Every failure class carries a Repair: who may act on it and how. Only the
// in-flight classes repair themselves (resuming the workflow dispatches with
// the same key); everything that moves money or changes an order goes to a
// person.
//
// # What it never does
//
// It classifies; it writes nothing to the store, the ledger or the order
// system. Findings are worklists for people and for the engine's resume.
//
// # Reading order and a live system
//
// The agent's records are read first and the systems of record after, so a
// step that finishes during the read shows as in flight, never as a done
// step whose entry is missing. Work that is moving while the job reads can
// still appear for one run (an entry made by a step created after the
// records were read shows as an entry without a step); a difference that
// persists across two runs is real. Over a quiescent system the report is
// deterministic: findings are ordered by workflow and step, by entry id, or
// by order.
//
// # Wiring
//
// [New] builds a [Job] over three small inputs: a [RecordSource] ([FromStore]
// over the bbolt store), a [Ledger] and a [Shipments] source (the dispatch
// package's *Ledger and *Orders clients satisfy them as they are). [Job.Run]
// runs one reconciliation and keeps it for [Job.Latest]; [Job.RunEvery]
// runs it on an interval. [Classify] is the pure comparison for callers that
// already hold the inputs (the drill, the tests).
package reconcile
