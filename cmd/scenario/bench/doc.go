// Package bench is `countersign bench`: it measures what a governed refund
// costs, end to end, through the real HTTP API.
//
// # What runs
//
// By default the dev stack (cmd/devstack: the sidecar, the simulated
// ledger and order system, each with its own bbolt file) starts in this
// process on loopback, over a fresh data directory. With Options.Sidecar
// the bench drives a sidecar already running (`serve --dev --data DIR`)
// with the tokens and endpoints that dev mode wrote into DIR.
//
// For each agent count, N agents run for Options.Duration. Each agent
// loops: propose a refund of 1 cent in a workflow of a fresh id, which the
// proposal opens (POST /v1/workflows/{id}/steps with a ticket: one
// request), as a representative of the fixture. With Options.TwoRequests
// (`--two-requests`) it first creates the workflow (POST /v1/workflows)
// and then proposes, two requests, as agents did before a proposal could
// open its workflow. A step counts as done only when the
// answer is 200 with status done; every other answer (and every request
// that got none) is counted under what it was, never dropped.
//
// # Keeping every refund allowed
//
// The policy stays p1 as shipped (or whatever the targeted sidecar has
// active). Its limits that 1-cent refunds would meet are spread out
// instead of raised: every agent refunds on an order of its own, added
// through the order system's test endpoint (POST /_sim/orders, paid
// $1,000.00) before the cell starts, and replaced by a fresh one every
// RefundsPerOrder refunds, far below the $50.00 that an order's refunds
// may reach before a lead must approve (R7). Agents alternate between
// rep-ana (EU) and rep-ben (US), each on orders of their own region. The
// caps that remain (a rep's $1,000.00 a day, the agent's $3,000.00 an
// hour) allow 100,000 and 300,000 such refunds: a run long enough to
// reach them shows the denials among the outcomes.
//
// # Figures
//
//   - done/s: done steps over the cell's wall time, from the first request
//     to the last answer (agents start no request after the duration, and
//     wait for the answers in flight).
//   - propose p50/p99 and create+propose p50/p99: nearest-rank percentiles
//     of the done steps' latencies (in one request both time that request).
//   - commits per step: the commits of every bbolt file of the in-process
//     stack (the sidecar's store, the ledger, the order system) over the
//     cell, read from each file's transaction id (store.DB.Commits), less
//     the orders the bench itself added during the cell, per done step.
//     fsyncs per step are twice that: bbolt with the default options
//     fdatasyncs once after the data pages and once after the meta page of
//     every commit (an fsync when a file grows is not counted). Out of
//     process they are unknown.
//   - CPU seconds per 1,000 steps: this process's user+system time
//     (getrusage) over the cell per 1,000 done steps. In process that is the
//     whole stack plus the bench's own HTTP clients; out of process it is
//     unknown.
//
// # On PostgreSQL, with several sidecars
//
// With Options.Store (`--store postgres://...`) the sidecars' store is
// PostgreSQL, as a fleet runs (issue 15). For each count of
// Options.Sidecars (`--sidecars 1,2,3`) the bench creates a fresh database
// on the URL's server (CREATE DATABASE countersign_bench_<run>_<k>; the
// role needs CREATEDB), starts k sidecars in this process on it, and drops
// it WITH (FORCE) when that count's cells are done: every sidecar count
// starts on an empty database, its agent counts then run one after the
// other on it, as they do on one bbolt file. The first sidecar is a dev
// stack with the ledger, the order system and the identity provider; the
// others join it with the production wiring (cmd/stack), all minting with
// one fresh key-encryption key's fleet keys. Agent i talks to sidecar
// i mod k.
//
// The figures differ from bbolt's: commits are each sidecar handle's own
// (store.DB.Commits counts only its own on PostgreSQL) summed, plus the
// ledger's and the order system's; the sidecars' serialization retries
// (store.DB.Retries) are printed beside them; fsyncs per step do not
// apply, since the server makes the WAL flushes, and print n/a rather
// than a figure that would count only the simulators; CPU is this
// process's, not the server's. The done steps per sidecar show the
// spread.
//
// # The store a network hop away
//
// On one machine PostgreSQL answers in tens of microseconds; a cloud
// database is a network hop away, and a sidecar that makes many round
// trips per call meets that hop on each. So the sidecars never reach
// PostgreSQL directly: the bench starts a proxy (package latency) in
// front of the URL's server for each sidecar count, and the sidecars'
// store URL points at it. Options.StoreLatency (`--store-latency 1ms`) is
// the round trip it adds, half each way; 0 adds only its copying. The
// proxy counts round trips and statements (package latency defines both),
// and each cell's row divides them by its done steps:
// round_trips_per_call and statements_per_call, one governed call being a
// workflow's creation and a refund's proposal. They count everything the
// sidecars sent in the cell, their background work included. The
// proxied URL has sslmode=disable unless the --store URL sets an
// sslmode, as the proxy reads statements from the bytes.
//
// # The baseline
//
// With Options.Baseline the same agents, for the same duration and on the
// same ledger, run what a team would write instead of countersign: an
// OPA server in this process (OPA's own server package and plugin
// manager, serving its REST API on loopback) loaded with the very bundle
// the sidecar has active. Per call the glue first looks the order up in
// the order system (GET /orders/{id} with an actor token minted for that
// lookup), since the policy needs the order's region, payment and status
// and the glue has no other source for them, as the sidecar looks it up
// too; then one REST decision (POST /v1/data/countersign/call/decision,
// with the input the engine would build from that order, less the
// history totals such glue does not keep: they are zero), then a direct
// ledger POST /refunds with an actor token minted by the
// stack's own credential authority and an idempotency key. A glue step is
// done when the ledger answers 201. The report prints countersign's
// done/s over the glue's per agent count.
package bench
