// Package actorcheck is the receiving side of countersign's actor tokens: the
// check that a system of record (the simulated ledger and order system) runs
// on every request before it acts.
//
// It is deliberately independent of the sidecar. It imports nothing of
// countersign's engine, credential minter or tool catalog; it knows only the
// token format, the published JWKS URL and the formula of the call binding,
// exactly as a real downstream system would. That independence is the point:
// a wrong policy in the sidecar is still bounded by what the receiver checks
// here.
//
// # The order of the checks
//
// A token is refused with the first reason that applies, in this order. The
// first group (401) needs only the token; the second (403) needs the request.
//
//	401 token_missing      no Authorization header, or not "Bearer <token>"
//	401 token_malformed    not three base64url parts, or a header or payload
//	                       that does not decode as a JSON object of the
//	                       expected shape
//	401 alg_not_allowed    header alg is not EdDSA (none, HS256, RS256 ...)
//	401 not_actor_token    the unverified payload has no act claim, or its
//	                       iss is not "countersign" (a person's token)
//	401 epoch_revoked      kid "epoch-N" with N below the JWKS's current epoch
//	401 unknown_kid        kid not in the JWKS, even after one refresh
//	401 bad_signature      the signature does not verify with the kid's key
//	401 exp_missing        no exp claim
//	401 token_expired      exp <= now, checked when the request arrives and
//	                       again when its effect commits ([Claims.Unexpired])
//	401 token_lifetime     no iat, exp - iat over 120 s ([MaxLifetime]), or
//	                       iat more than 5 s ahead of now ([MaxClockSkew])
//	401 token_malformed    the epoch claim differs from the kid's N, aud is
//	                       neither a string nor an array of strings, or (with
//	                       the single-use check on) there is no jti
//	401 token_replayed     this jti was already accepted (see below): from
//	                       the durable record for a write, from memory
//	                       for a read (a lookup), which commits nothing
//	403 wrong_audience     aud is not this system
//	403 wrong_scope        scope is not this operation's
//	403 call_mismatch      call claim differs from the binding of THIS request
//	403 key_mismatch       key claim differs from the request's
//	                       Idempotency-Key (absent on both sides is equal)
//	403 reference_mismatch ref claim differs from the request's reference
//	                       (absent on both sides is equal)
//	403 line_mismatch      line or quantity claim differs from the
//	                       line-item refund's (absent on both sides is equal)
//	403 amount_above_max   a refund amount above the max claim
//
// Refusing on unverified data (alg, act, iss, kid) is safe: only acceptance
// needs a verified signature, and every accepted token has one.
//
// # Expiry at commit
//
// A token's exp bounds when the request it carries can take effect, not
// only when it may arrive: a receiver checks exp again in the transaction
// that commits the request's effect, after whatever held the request up
// (a queue, a lock, a slow disk; the simulators' injected delay_writes_ms
// comes before the handler and the commit after it). countersign relies
// on it: once every token minted for a step has expired (plus the clock
// skew it allows receivers), a lookup that still finds no effect proves
// that none will land, and only then does it send the call again. A
// receiver that checked exp only on arrival would let a request that
// waited past it land after that proof. The simulators check it at commit
// (package simserver, Core.Act), refusing 401 token_expired without using
// up the jti.
//
// # Single use
//
// A token is minted for one attempt, so a receiver accepts its jti once: a
// token captured in flight and posted again, under another idempotency key
// or none, is refused, where the key alone would have made a new entry.
// The jti is recorded as the last check of the 401 group, so only a token
// that is otherwise valid uses it up, and the replay check comes before
// anything about the request. The record is kept until the token's exp (an
// expired token is refused anyway) in [Options.Replays]: in memory by
// default. A caller that retries mints a fresh token for every attempt.
//
// A receiver with its own durable store may record the jti itself, in the
// transaction that acts on the request, so that the record and the write
// it authorizes cost one commit: it calls [Verifier.Authenticate] (the 401
// group without the record), then ends every request in that transaction
// or in one that records the jti alone (a request it refuses), and answers
// [Replayed] whatever else it would have answered when the jti was there
// already. The order above holds, and a replayed token never acts. The
// simulators do this (package simserver), in their bbolt files, so that a
// restart does not forget.
//
// Only writes need that durable record. A token that can only read (the
// order system's lookup scope) is held to single use from memory
// ([MemoryReplays]) for its lifetime, and the read commits nothing: a
// replay is refused 401 token_replayed as any other, in the same place in
// the order above, and one that a restart let through would read the
// order again, as its first use did, and move no value. The lifetime
// bound (120 s at most) is what such a replay can reach past a restart.
// So a lookup costs a read transaction, no commit and no fsync, where a
// write still records its jti in the transaction of its effect.
// [Options.AllowReplay] removes the check; only tests that show it is
// load-bearing set it.
//
// The lifetime bound keeps that record small and honest: a token cannot
// claim to be good for a day, nor be minted ahead for later use.
// [Verifier.Verify] runs the 401 group, [Claims.Authorize] the 403 group, and
// [Verifier.Check] both. A refusal is a *[Refusal] carrying the status, the
// stable code and a message for a person.
//
// # The call binding
//
// A token names the one call it was minted for:
//
//	call = hex(sha256(tool + "\n" + canonical JSON of the arguments))
//
// where the canonical JSON is an object with its keys sorted and no white
// space: issue_refund {"amount":3000,"order":"O-1001"}, lookup_order and
// reship_order {"order":"O-1001"}, reverse_refund {"entry":"L3"}. The
// receiver recomputes it from the request it actually received ([RefundCall],
// [OrderCall], [ReversalCall]), so a token minted for $30 on O-1001 does not
// pay $300, nor anything on O-1002.
//
// A line-item refund's canonical JSON adds its line and quantity,
// {"amount":1200,"line":"L2","order":"O-1001","quantity":1}
// ([LineRefundCall]), and its token carries them as claims too (line,
// quantity), so a receiver can say which of them differs.
//
// Two more claims bind what the call hash leaves out: key, the
// Idempotency-Key of a ledger write, and ref, the reference a reshipment
// carries. A refund token minted for one key cannot make an entry under
// another, and a reship token cannot ship under another step's reference.
//
// # Keys and epochs
//
// The sidecar publishes only the current epoch's public key, with kid
// "epoch-N". The verifier fetches that JWKS and keeps it for
// [Options.MaxAge]; a kid it does not know triggers one refresh, rate
// limited by [Options.MinRefreshInterval] so a stream of invented kids
// cannot turn the receiver into a fetch loop against the sidecar.
//
// So a raised epoch reaches a receiver at once for new tokens (their kid is
// unknown, and fetched), but a token of the earlier epoch still finds its
// key in a cached set until that set is older than MaxAge: MaxAge is the
// bound on how long after POST /v1/credentials/epoch such a token is still
// accepted. The simulators use [DefaultMaxAge], 1 s; 0 fetches on every
// request and bites at once, at the cost of a fetch per request. A JWKS that cannot be
// fetched fails closed: the request is not served ([ErrKeysUnavailable]).
package actorcheck
