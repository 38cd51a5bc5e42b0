// Package drill runs the incident drill: three simulated hours of support
// tickets through the real countersign (engine, store, OPA policy, actor
// credentials, ledger and order system, all of cmd/devstack on
// loopback), during which a policy release with a units mistake removes the
// approval step, and what the records, the monitor, containment,
// reconciliation and compensation make of it.
//
// # Time
//
// Nothing sleeps. Every component reads one simulated clock, which the
// drill sets to the time of each event before handling it, so three hours
// take seconds and a run depends only on its seed. Two runs with the same
// seed print the same bytes: the traffic and the leads' choices come from
// math/rand/v2 streams seeded by it, audit ids from a ChaCha8 stream seeded
// by it (devstack.Options.Entropy), and everything printed is either a
// count, an amount, a simulated time relative to the release, or an id the
// systems number in sequence (W-0001, AP-1, L1). Ports, keys and token ids
// are random and never printed.
//
// # The scenario
//
// Tickets arrive with exponential gaps of 90 s on average. Each is one
// workflow of rep-ana (EU) or rep-ben (US), on an order of the rep's region
// generated for it (shipped, paid the refund plus $0–$150). 70% ask a refund
// of $5–$49, 22% of $51–$500 and 8% of $501–$900; a third also ask a
// reshipment. Within $51–$500 the amounts are log-uniform (as many from $51
// to $100 as from $250 to $500): drawn uniformly, a rep's expected three
// hours would sit right at the raised daily cap and R5 would decide the
// last hour of most runs; as it is, it still binds late in the heaviest
// seeds, and the table shows each denial by its rule. Reshipments are not kept simple: an order paid above $300
// needs a lead's approval (R9) like any other, so the queue holds both
// kinds. The agent proposes the lookup, the refund and the reshipment as
// soon as the ticket arrives, and resumes the workflow each time a lead has
// acted on one of its approvals.
//
// The caps are raised in the bundles' data to $5,000 per rep per rolling day
// and $10,000 per hour for the agent, so that they do not dominate; the
// three bundles keep their revisions p1, p2 and p3 and differ from the
// embedded ones only in those two numbers.
//
// Leads review the queue every 2 minutes. Each pending approval is approved
// with probability 0.6 by the lead of the requester's region whose limit
// covers it (lead-dee EU, lead-eli US); the rest wait for the next review.
// Nobody rejects: an approval that waits past its 15 minutes is refused as
// expired when a lead next tries it, and the agent's resume asks for a new
// one, as the engine does for any expired approval.
//
// At +60 minutes ops-ida releases p2 by break-glass. The monitor checks the
// records every 5 minutes; 10 minutes after its first invariant alert the
// operator contains (issue_refund switched off, credential epoch raised).
// The fix, p3, is released 30 minutes after p2, and never sooner than 5
// minutes after containment; 5 minutes later issue_refund is switched on
// again and every paused workflow is resumed under p3.
//
// # The gate and the raised caps
//
// The gate's pinned cases include the company's caps ($1,000 per rep per day,
// $3,000 per hour), so a bundle with the drill's caps fails two of them
// whatever else it says. The drill therefore shows the gate's verdict on
// the bundles as shipped (p2 fails its three limit cases; p1 and p3 pass),
// checks that its own copies fail nothing but those two cap cases, and
// installs its p1 and p3 by break-glass with that verdict as the recorded
// reason. A gate whose cap cases followed the deployment's caps would let
// the copies through the gate itself; the limit cases, which p2 fails,
// would not change.
//
// # After the traffic
//
// The per-policy table attributes each refund step to the revision of its
// last decision in the decision log. The worklist is reconciliation's
// refund_over_limit_without_approval findings, selected by the refunds' own
// properties, not by a time window. A lead reviews each item: a refund whose
// ticket also had a reshipment (damaged goods), or whose exact call a lead
// had already approved before p2 let it run without consuming the approval,
// is ratified; the others are reversed in the ledger, and their total is the
// money to recover outside the system. Reconciliation then runs again and
// must find nothing unexplained.
//
// # What a run does not show
//
// The drill dispatches one call at a time, so when it contains no actor
// token is outstanding: raising the epoch is done and recorded, but it
// refuses nothing here (the control-removal tests show it biting). The
// process-shape monitor rarely fires, because its one-hour window still
// holds the approvals p1 asked for when p2 arrives, and the fix comes
// within the hour. The leads' 60% is a rate of approval, not a measure of
// attention. A reversal is a ledger entry; recovering the money is outside
// the system. And the upper bound on the violation rate assumes refunds
// that are alike and independent; what carries the guarantee is the
// structure (the token ceiling, the approval binding, the monitor at the
// effect), not the sample.
package drill
