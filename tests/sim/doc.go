// Package sim searches seeded simulated worlds for a way to pay twice:
// each seed is a sidecar's engine on its own bbolt file, the simulated
// ledger and order system behind a simulated network, one simulated
// clock, and a random workload with faults; after it, the invariants are
// checked. The same seed gives the same event trace, so any seed that
// breaks an invariant can be replayed, and shrunk to the fewest events
// that still break it.
//
//	go test ./tests/sim -seeds 500            # fresh seeds, printed
//	go test ./tests/sim -run TestSimulate -seed S -seeds 1 -v   # one seed, its trace
//	countersign simulate --seeds 10000 [--json]
//	countersign simulate --seed S --trace
//
// # A world
//
// The pieces are the real ones, wired in process: engine.Engine over
// store.DB (bbolt), the policy engine with the embedded bundle p1 (its
// caps lowered to $400 per rep day and $500 per agent hour, so that they
// bind), the credential authority minting an actor token per attempt,
// the dispatch clients (systems.Systems) and the ledger and order system
// of executor/sim, which verify every token themselves (package
// actorcheck). People are the fixture's (reps rep-ana and rep-ben, leads
// lead-dee, lead-eli and lead-fay, operator ops-ida), handed to the
// engine as the sidecar's authn would after verifying their tokens; the
// HTTP faces are not in the loop. Six orders are drawn per seed, paid
// $30 to $600, most of them shipped.
//
// The network is an http.RoundTripper that calls the receivers' handlers
// in process. Each request is delivered, refused (never sent), answered
// 503 without effect, dropped (sent, never arrives), cut (the receiver
// acts, the answer is lost), duplicated (the receiver gets it twice), or
// delayed (the receiver gets it at a later event, when its token may have
// expired); reads are only delivered, refused, answered 503 or cut. A
// seed draws how faulty its network is: never, 5%, 15% or 30% of
// requests. The receivers' clocks run up to 2 s ahead of the sidecar's or
// up to the allowed skew (5 s) behind.
//
// # The workload and its faults
//
// A seed plans 60 events (DefaultEvents), each after a pause of 1 to 90
// simulated seconds: reps' agents open workflows and propose refunds
// (amounts near the auto limit, near what the order paid, above the
// rep's ceiling, or small; now and then with an approved_by the model
// made up) and reshipments, repeat their last call, amend a refund that
// waits for an approval, and resume; leads approve, reject or let wait;
// the operator flips a tool's switch; the network delivers some of the
// requests it held; the clock jumps 5 to 40 minutes (approvals expire);
// a crash is armed at one of the engine's failpoints (before_dispatch,
// after_dispatch, after_record) and the engine crashes when it next
// reaches it; or the sidecar is killed between events. A crash closes
// the engine and its store without finishing the step in hand, opens a
// new engine over the same file and runs ResumeAll, as a restart does.
//
// At the end the world settles: the network heals, the clock passes every
// token's expiry, the delayed requests arrive (and are refused), the
// operator switches every tool on, and one ResumeAll runs.
//
// # Invariants
//
// Checked at every restart: a step the engine answered done is done
// (InvAcked). Checked when an effect is first sent: its tool is switched
// on (InvSwitch). Checked after settling: one ledger entry per done
// refund, by order in number and amount, and none under a key no step has
// (InvLedger); no order refunded above what it paid (InvPaid); no rep's
// rolling day and no agent's rolling hour above its cap (InvRepDay,
// InvAgentHour); on each order, refunds without a used approval bound to
// their call add up to at most the auto limit (InvApproval); one
// reshipment per done reship step and no reference shipped twice
// (InvShipment); at most two reshipments of an order (InvReshipLimit);
// the audit chain verifies (InvAudit); reconciliation finds nothing
// unexplained (InvReconciles); and no step is left pending, started or
// unknown (InvSettles: with the network healed, no lookup keeps failing).
//
// TestRemovedControlsAreFound removes engine controls one at a time (with
// the layer under it where one stands in for another, as the
// control-removal matrix does) and finds the seed that breaks the
// invariant each protects.
//
// # What is deterministic
//
// Everything the trace records: the plan, every event's draws and the
// network's fates come from math/rand/v2 PCG sources seeded by the seed
// (one per planned event, so that dropping events while shrinking leaves
// the others' draws alone); audit ids from a ChaCha8 stream seeded by it;
// time only from the simulated clock. One goroutine drives a world: the
// engine dispatches on the goroutine that proposes or resumes, so every
// request reaches the network, and every draw happens, in the order the
// scheduler runs them. The store's group commit and a done step recorded
// after its answer run on goroutines of their own; the scheduler flushes
// the store after every event, so each event starts from durable records.
//
// Not deterministic, and kept out of the trace: the signing keys, the
// tokens' ids and the keys the dispatcher draws with IdempotencyKeys
// removed; the wall-clock time a seed takes. Seeds run in parallel
// (Options.Workers), each in its own world, which shares nothing but the
// parsed bundle.
//
// # Not simulated (yet)
//
// A fleet (several engines on one shared store, leases, a holder paused
// past its TTL: that needs PostgreSQL, see tests/fleet); a crash that
// loses what the store's group commit held (a closed store flushes it,
// so a done step answered before it was durable is never lost here:
// tests/crash kills real processes for that); store write failures; a
// raised credential epoch; bundles activated and rolled back mid-flight;
// line-item refunds; the HTTP faces and their tokens.
package sim
