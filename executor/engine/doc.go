// Package engine is countersign's durable step engine: it takes a tool call
// that an agent proposed for a rep, and normalizes, rehydrates, decides,
// approves, reserves, dispatches and records it, so that a crash or a retry
// never pays twice.
//
// # How a step runs
//
//  1. Normalize: the arguments are decoded strictly against the tool's
//     schema (tool.Normalize). An approval claimed in the arguments is a
//     schema error, never an approval.
//  2. Dedupe: the same call again in one workflow is suppressed and names
//     the step it duplicates.
//  3. Rehydrate: the order comes from the order system; the prior refunds on
//     the order, its reships in any workflow, the rep's rolling day and the
//     agent's hour come from the store's indexes.
//  4. Decide and reserve: the active bundle decides outside any write
//     transaction, from facts read in a read transaction, so a slow
//     evaluation holds up only its own workflow. The write transaction
//     (shared with other workflows' writes in one group commit, and for a
//     proposal also the one that admits the step, and that creates its
//     workflow when the proposal opens it: ProposeOpening, one commit
//     where a create and a propose took two) takes that verdict only
//     if the facts it read are unchanged, and otherwise decides again
//     inside; it logs the decision with its rule and revision, requests
//     or consumes an approval, and marks the step started with its
//     baseline. bbolt has one writer, so two concurrent calls cannot both
//     spend the same headroom.
//  5. Dispatch: the tool's switch was read inside that transaction, at the
//     moment of effect, which also recorded the step's token deadline. A
//     fresh actor token is minted per attempt, never expiring after that
//     deadline; the ledger gets the stable idempotency key, the order
//     system the step's reference.
//  6. Record: done with the result, denied when the system of record
//     refused, unknown when the outcome could not be seen. A done step
//     that resume would find done again by itself (write-ahead on, and a
//     refund's key, a reshipment's reference, or a read) is answered
//     before its record is durable: the record rides the next group
//     commit, and the workflow's lock and its readers wait for it.
//
// A crash between any two of these points is safe: on resume a started
// refund is dispatched again with the same key (the ledger replays), and a
// started or unknown reshipment is resolved by its reference in the order
// system (or, with that control removed, by comparing the order's shipment
// count with the baseline taken before the call), found at once, absent
// only once no request of it can land (below). So an answer the agent has
// seen, done or waiting for approval, is true after a crash.
//
// # Effects fenced by time
//
// A request can land until its actor token expires, and a sidecar that
// sent one may be held up (paused, partitioned) long after it lost its
// lease. So "not found" is taken to mean "never sent" only once no
// request that could carry the effect can land any more (fence.go, the
// EffectFence control):
//
//   - The write-ahead transaction that marks a step started records its
//     token deadline, a dispatch TTL ahead (Options.TokenTTL, 15 s by
//     default, or the bundle's token_ttl_seconds when shorter): no round
//     trip is added. The dispatcher mints no token that expires after it
//     (Call.NotAfter). An attempt that needs a later deadline (a retry, a
//     resume, a takeover) first extends it durably; it never moves back.
//   - The step's resolve time (store.Step.ResolveAfter, resolve_after in
//     the API) is that deadline plus the clock skew the receivers are
//     allowed (Options.ReceiverSkew, 5 s). The receivers check exp when the
//     effect commits, so after it no request of the step can land.
//   - Until then the step stays started (or unknown) and keeps its
//     reservation. A reshipment not found waits; a refund is sent again
//     only under its idempotency key; a 5xx, a timeout, or the refusal of
//     a later attempt releases nothing.
//   - After it a resume, or on a fleet the sweeper (the workflow's lease is
//     parked until then), looks the effect up: found, the step is done;
//     not found, it is proven absent, and the call is sent again with a
//     fresh token (a step whose last attempt did nothing, a 5xx say, is
//     released and decided again first, as that answer alone released it
//     before).
//
// A reshipment left unknown by a lost answer is so resolved without a
// person once its tokens have expired. Removing the control restores the
// second wave: absent on lookup is taken at once, and a 5xx releases the
// reservation.

// # Whose delegation
//
// A workflow stores the delegation of the token that created it, with that
// token's expiry. Each propose, amend and resume by the rep's agent runs
// under the narrower of the stored delegation and the presenting token
// (scopes both grant, the lower ceiling, and a region the token must share
// with the workflow, else R2 denies), for the decision and for the actor
// token alike. A later token of the rep extends the expiry, never what is
// granted. Past the expiry, a resume that presents no token (an
// operator's, the start-up one) holds the steps it would decide, with note
// delegation_expired; steps already started are finished, since their
// effect was decided while the delegation stood.
//
// # Waiting for a person
//
// A step that needs an approval is a record, not a goroutine. Approving does
// not execute anything: the step runs at the next Resume of its workflow,
// where the approval is consumed only if it is approved, unexpired and bound
// to exactly this call.
//
// Who may decide an approval has a floor in Go that no bundle widens
// (approve.go, floor): only a lead, and never the requester, compared as
// people (identity.Same: Rep-Ana is rep-ana). It is checked before the
// approval's status and before the active bundle's approver rules, which
// then narrow (region, limit, expiry) and see both ids in their canonical
// form. Every front reaches it the same way: the API, the lead's page and
// the lead's MCP tools call Approve and Reject, and a ratification or a
// reversal checks it too.
//
// # What a rep may know
//
// A rep reads and drives only her own workflows and sees only the
// approvals of her own calls. Another rep's workflow or approval is, to
// her, not found, with the very error an id nobody used gets, so that no
// answer tells her which ids exist (approval ids are sequential) or whose
// they are. An attempt to approve is refused by the floor before the
// approval is read. Opening a workflow under an id another rep uses is
// the one answer that must differ (the id is taken, ErrWorkflowExists),
// and it says no more than that.
//
// # A fleet on one store
//
// Several sidecars may share one PostgreSQL store (cmd/stack StoreURL).
// Two of them can never spend the same headroom: the decision and the
// reservation commit in one transaction, and PostgreSQL runs it
// SERIALIZABLE (executor/store): each of two concurrent decisions reads
// the totals (order, rep's day, agent's hour) the other then writes, so
// one of them fails to commit, runs again from its first read, and decides
// on the totals the winner left. No lock is shared by the fleet, and
// nothing but those totals is written by every decision (numbers come
// from sequences, audit records are chained afterwards by a sequencer,
// each sidecar adds to running sums of its own), so two decisions that
// share no rep, order or agent window never wait for or abort each other,
// and a sidecar stalled inside a decision holds up no other sidecar: its
// transaction fails to commit when it wakes if another spent meanwhile.
// Within one sidecar the refunds' decisions, which all read and add to
// the agent's hour, queue on one store lane (lane, store.DB.BatchIn)
// rather than abort each other. No total is cached outside a
// transaction, and the verdict made before the writer (verdict.go) is
// used only if the transaction reads the same facts. Switches, modes,
// breaker trips and approvals are read in the transaction too, so a change
// through any sidecar applies to the next decision everywhere.
//
// On PostgreSQL a governed call is four transactions of two round trips
// each (a round trip to a database a network hop away costs about a
// millisecond, and is what a call's latency is made of): the lease taken
// with the plan's reads (lockWith: the workflow, the call's entry, the
// switch, the totals, the steps and the credential epoch ride with the
// lease read); the decision (one prefetch of what it reads, with the
// numbers its records take drawn ahead, then the commit with every
// write); the step's record after the effect; and the lease's release,
// after the answer. Tokens are minted with the credential epoch the
// transaction read (credential.WithEpochRead). Only the decision runs
// SERIALIZABLE, and it reads under that isolation only what another
// sidecar may write: the totals, switches, modes, breakers, approvals and
// the active digest. The workflow's own records it takes as the lease
// transaction read them (store.Tx.Assume): nobody but the holder of the
// fenced lease writes them, and a predicate lock on their index pages
// made decisions of unrelated workflows abort each other. The lease, the
// record and the audit sequencer run REPEATABLE READ (store.DB.UpdateRows):
// each writes every row its correctness rests on.
//
// The active bundle is the one thing a decision takes from memory (the
// compiled policy). With Options.Follow, each decision transaction reads
// the store's active digest (one key) and, when another sidecar activated
// a newer bundle, drops the transaction, loads that bundle and decides
// again: no decision commits under a bundle superseded before it
// committed, as the read of the digest makes the decision and the
// activation conflict under SERIALIZABLE. The readers waiting for a
// workflow to change (Await) are woken by this engine's commits; with
// Options.PollChanges they also read the workflow again every period, so
// another sidecar's change reaches them within it. Polling, not
// PostgreSQL's LISTEN/NOTIFY: a notification would need a connection per
// sidecar held outside the pool, re-subscribed after every reconnect (a
// change missed meanwhile is a reader that never wakes), and a NOTIFY
// sent from inside the store's transactions, which speak only buckets and
// keys; polling costs one read of the workflow per waiting reader per
// period and cannot miss a change.
//
// The per-workflow locks are in-process. With Options.Leases a workflow is
// also driven by one sidecar at a time (lease.go): whoever proposes,
// amends, runs, resumes, ratifies or reverses a step first takes the
// workflow's lease in the store (holder: the sidecar's random id per
// process start; an expiry), renews it every TTL/3 while it works (a
// dispatch may outlast a TTL) and deletes it once its last write is
// durable, or parks it, held by nobody, until a step left waiting may be
// resolved. A request that finds the lease held by another live sidecar
// polls until it is free, bounded by its context (ErrLeaseHeld). A sidecar
// shut down deletes its leases (Close waits for that); one killed leaves
// them to expire, and Sweep, run every TTL/2 in every sidecar of the
// fleet, resumes the workflows of expired (and parked, once due) leases,
// resolving started steps by the same lookup rules as a restart.
// ResumeAll at start resumes every open workflow no live sidecar holds.
// On bbolt there is one process, and no lease: no store round trip is
// added.
//
// A lease is fenced by number, as an effect is by time. Every taking gets
// a fencing number larger than any before (one sequence in the store, so
// it grows per workflow even across deleted leases), and every write of a
// step's state checks, in its own transaction, that the workflow is still
// held under it (the LeaseFencing control): a sidecar held up past its
// lease, whose renewals stopped and whose workflow another took over,
// finds its late write refused (ErrFenced, 409 workflow_taken_over), logs
// the takeover and stops driving the workflow; it never overwrites the
// survivor's record. On PostgreSQL the check is a statement queued with
// the transaction's writes (store.Tx.CheckFence): no round trip. It locks
// the workflow's fence row until the write commits, and leases are taken,
// renewed and released at REPEATABLE READ (store.DB.UpdateRows), rows of
// their one workflow in a fixed order (lease, then fence): a takeover
// that starts while a checked write is under way waits for its commit,
// and one that committed first makes the write fail, even where the
// write's snapshot predates it. Leases so take no predicate locks, and
// never abort a decision for touching the same index page (they were
// most of the retries under load). Taking one costs two round trips: the
// lease read with a fencing number drawn, and the commit.
//
// # Controls
//
// Every control above has a switch in Controls, all on by default. Nothing
// reachable from configuration turns one off: they exist so tests can
// remove one at a time and show that the failure it prevents then happens.
package engine
