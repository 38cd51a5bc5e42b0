// Package sim searches seeded simulated worlds for a way to pay twice:
// each seed is one sidecar's engine on its own bbolt file, or a fleet of
// two or three on one store, the simulated ledger and order system behind
// a simulated network, one simulated clock, and a random workload with
// faults; after it, the invariants are checked. The same seed gives the
// same event trace, so any seed that breaks an invariant can be replayed,
// and shrunk to the fewest events that still break it.
//
//	go test ./tests/sim -seeds 500            # fresh seeds, printed
//	go test ./tests/sim -run TestSimulate -seed S -seeds 1 -v   # one seed, its trace
//	countersign simulate --seeds 10000 [--json]
//	countersign simulate --seed S --trace
//
// # A world
//
// The pieces are the real ones, wired in process: engine.Engine over
// store.DB (bbolt), a policy engine per sidecar recording activations in
// the store (release.History) and starting from the bundle the store
// records as active, the credential authority minting an actor token per
// attempt, the dispatch clients (systems.Systems) and the ledger and
// order system of executor/sim, which verify every token themselves
// (package actorcheck) against the sidecar's JWKS, fetched for every
// request, so that a raised epoch bites at once. People are the
// fixture's (reps rep-ana and rep-ben, leads lead-dee, lead-eli and
// lead-fay, operators ops-ida and ops-jon), handed to the engine as the
// sidecar's authn would after verifying their tokens; the HTTP faces are
// not in the loop. Six orders are drawn per seed, paid $30 to $600 but
// for one of each region paid $500 to $900 (above a rep's ceiling), most
// of them shipped.
//
// The bundles (bundles.go) are p1 with its caps lowered to $500 per rep
// day and per agent hour, so that R5 and R6 bind (p1-sim, which every
// world starts with), and four changes of it: a pure tightening (the auto
// limit $40), a loosening one operator asks for alone (rep-ben exempt
// from R7), rules that let rep-ana approve (two operators), and every
// money limit a hundred times too large, released by break glass.
//
// Half the seeds are a fleet (fleet.go): two or three engines, each with
// its own policy engine, release service, clock (up to 1 s either side
// of the world's) and lease holder, on one store.DB opened once. The
// engine's leases, their fencing numbers and parking live in the store
// and are read and written in the same transactions on bbolt as on
// PostgreSQL, so a store.DB shared in process gives the fleet's lease
// semantics; what PostgreSQL adds (several processes, SERIALIZABLE
// retries, the audit sequencer) is tests/fleet's, and is not simulated.
// The members follow the store's active bundle (Options.Follow) and share
// the one credential authority.
//
// The network is an http.RoundTripper that calls the receivers' handlers
// in process. Each request is delivered, refused (never sent), answered
// 503 without effect, dropped (sent, never arrives), cut (the receiver
// acts, the answer is lost), duplicated (the receiver gets it twice), or
// delayed (the receiver gets it at a later event, when its token may have
// expired); reads are only delivered, refused, answered 503 or cut. A
// seed draws how faulty its network is: never, 5%, 15% or 30% of
// requests. The receivers' clocks run up to 1 s ahead of the world's or
// up to 4 s behind it: within what the engine allows for (5 s behind)
// and the receivers allow a minter (2 s ahead) from every sidecar.
//
// # The workload and its faults
//
// A seed plans 60 events (DefaultEvents), each after a pause of 1 to 90
// simulated seconds, each served by one of the active sidecars as a load
// balancer would pick it: reps' agents open workflows and propose refunds
// (amounts near the auto limit, near what the order paid, above the
// rep's ceiling, or small; now and then with an approved_by the model
// made up) and reshipments, repeat their last call, amend a refund that
// waits for an approval, and resume; leads approve, reject or let wait;
// rep-ana tries to approve; the operator flips a tool's switch; the
// network delivers some of the requests it held; the clock jumps 5 to 40
// minutes (approvals expire); a crash is armed at one of the engine's
// failpoints (before_dispatch, after_dispatch, after_record) and the
// sidecar that next reaches it crashes; a sidecar is killed between
// events; the store is set to fail every write from the start of the next
// call or from a failpoint (so that the write-ahead record, the outcome
// of an effect that took place, the release of a lease or the opening of
// a workflow fails) to the end of that event (store.Options.FailWrite);
// the credential epoch is raised; in one seed of three, operators release
// bundles (at most two releases a seed: tighten, loosen alone, two
// activate the approver rules, two break the glass, roll back with a
// second operator when the gate asks for one). In a fleet, a sidecar is
// paused in the middle of a refund's dispatch (its lease taken, its
// write-ahead record made, its request written) and later resumed, past
// its lease's 5 s TTL; and a sidecar runs its sweeper.
//
// A crash stops the engine without finishing the step in hand and starts
// a new one, as a new process, which runs ResumeAll: one sidecar reopens
// its bbolt file; a fleet's member starts over the store the others keep
// using, under a new holder id.
//
// At the end the world settles: the store writes again, the network
// heals, the clock passes every token's expiry and every lease, the
// delayed requests arrive (and are refused), the operator switches every
// tool on, one sidecar runs ResumeAll (taking over a paused sidecar's
// workflow), then the paused sidecar comes back and finishes its call,
// and ResumeAll runs once more.
//
// Releases go through the policy engine's Activate after following the
// store's active bundle, as release.Service does, with what decides
// whether a bundle goes live (the gate, the two-person rule, break
// glass); the replay and the review release.Service attaches for the
// second operator to read are left out: they take about half a second per
// activation and decide nothing.
//
// # Invariants
//
// Checked at every restart: a step a sidecar answered done is done
// (InvAcked), but for one answered while the store failed writes, whose
// record may not have committed (engine.recordLater: resume resolves it
// by key or reference; settling must have). Checked when an effect is
// first sent: its tool is switched on (InvSwitch). Checked as each
// request is served: no receiver accepts a write under a token of an
// epoch raised past (InvEpoch). Checked after settling: one ledger entry
// per done refund, by order in number and amount, and none under a key
// no step has (InvLedger); no order refunded above what it paid
// (InvPaid); no ledger refund above its rep's ceiling (InvCeiling); no
// rep's rolling day and no agent's rolling hour above its cap (InvRepDay,
// InvAgentHour); on each order, refunds without a used approval bound to
// their call add up to at most the auto limit (InvApproval); every
// approval granted was granted by a lead who is not its requester
// (InvApprover); one reshipment per done reship step and no reference
// shipped twice (InvShipment); at most two reshipments of an order
// (InvReshipLimit); the audit chain verifies (InvAudit); reconciliation
// finds nothing unexplained (InvReconciles); and no step is left pending,
// started or unknown (InvSettles: with the network healed, no lookup
// keeps failing). A step decided under the break-glass bundle is held to
// no cap and no auto limit (its bundle had neither, by two operators'
// choice), and reconciliation's finding that it went over the strictest
// auto limit known is its design, for a person to look at; the ceiling,
// what was paid and every other invariant still hold it.
//
// TestRemovedControlsAreFound removes engine controls one at a time (with
// the layer under it where one stands in for another, as the
// control-removal matrix does) and finds the seed that breaks the
// invariant each protects. Every control of engine.Controls is searched
// for but four the world cannot reach, each covered by its row of the
// control-removal matrix (cmd/scenario/demo) instead:
//
//   - NarrowDelegation narrows a step to the delegation of the token
//     that presents it; the world hands the engine fixture people whose
//     scopes and ceilings never change within a seed, so the delegation
//     copied at creation and the presenting one are always the same.
//   - RestrictedBuiltins refuses a bundle that calls http.send or reads
//     the wall clock; the simulation's bundles call neither, and what
//     such a bundle would do (reach the network, decide differently on
//     replay) is outside what a world can observe.
//   - Breaker withdraws autonomy from an agent version whose calls keep
//     failing the schema or the policy; the world's agent is one version
//     whose calls are well formed, and autonomy withdrawn is not an
//     invariant of money paid.
//   - LinePricing prices line-item refunds from the order's lines; the
//     workload proposes no line-item refunds.
//
// ResolveByReference (seed 583 with ReferenceKeys removed too) is
// searched only with -slow-controls, to keep the default suite's search
// short. Rows that remove the same controls share their seeds' runs.
//
// # What is deterministic
//
// Everything the trace records: the plan, every event's draws and the
// network's fates come from math/rand/v2 PCG sources seeded by the seed
// (one per planned event, so that dropping events while shrinking leaves
// the others' draws alone); audit ids from a ChaCha8 stream seeded by it;
// time only from the simulated clock; lease holders are named by sidecar
// and start. One goroutine drives a world at a time: the engine
// dispatches on the goroutine that proposes or resumes, so every request
// reaches the network, and every draw happens, in the order the scheduler
// runs them. A paused sidecar's call runs on a goroutine of its own, but
// hands over to the scheduler when the network holds its request and back
// when it is resumed, so the two never run at once. The store's group
// commit, a done step recorded after its answer and a lease let go run on
// goroutines of their own; the scheduler waits for them (quiesce) after
// every event, so each event starts from durable records. No lease is
// renewed within a seed (renewals run on the wall clock), and a call is
// never made on a workflow another live sidecar holds: the engine would
// poll for the lease on the wall clock until the call's context ended,
// so the harness answers what the agent would see (the call times out,
// engine.ErrLeaseHeld) without making it.
//
// Not deterministic, and kept out of the trace: the signing keys, the
// tokens' ids and the keys the dispatcher draws with IdempotencyKeys
// removed; the wall-clock time a seed takes. Seeds run in parallel
// (Options.Workers), each in its own world, which shares nothing but the
// parsed bundles.
//
// # Not simulated
//
// PostgreSQL, its retries and several processes (tests/fleet runs real
// ones); a crash that loses what the store's group commit held (a closed
// store flushes it, so a done step answered before it was durable is
// lost here only by a failed write: tests/crash kills real processes);
// each fleet member's own credential authority over the store's keys;
// line-item refunds; the HTTP faces and their tokens.
package sim
