// Package simserver is the skeleton every simulated system of record
// shares: the options they all take, the opening of their bbolt file, the
// token verifier with its single-use record of jtis (kept in that file, so
// a restarted system still refuses a replayed token), the fault counters and their /_sim/faults endpoints, the
// delay fault, and serving and closing.
//
// A system (package ledger, package orders) calls [Open] with its [Spec]
// (its name, its file, the transaction that creates its buckets). It embeds
// the returned [Server], which gives it ServeHTTP, Serve, Close, SetFaults
// and Faults, and keeps the [Core] (clock, logger, bbolt handle, verifier,
// fault counters, router) in an unexported field for its own handlers and
// routes, so its API shows nothing of its storage. Its handlers end every
// request whose token authenticated in [Core.Act] or [Core.Refuse], which
// record the token's jti in the request's own write transaction; the write
// transactions of concurrent requests share one commit (group commit). Like the systems, this
// package imports nothing of the sidecar or the engine.
package simserver
