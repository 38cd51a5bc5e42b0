// Package ledger is the simulated payments ledger: a small HTTP server with
// its state in its own bbolt file, standing in for the system of record that
// countersign's refunds land in. It is shipped for the demo and the tests,
// and behaves the same in process (serve --dev) and alone
// (countersign sim ledger).
//
// Like a real downstream system it trusts nothing the sidecar's engine
// believes. It verifies every actor token itself (package actorcheck)
// against the sidecar's published JWKS, and it imports nothing of the
// sidecar or the engine.
//
// # Endpoints
//
//	POST /refunds            {"order","amount"} or, for a line-item refund,
//	                         {"order","amount","line","quantity"} (the token's
//	                         line and quantity claims must match: 403
//	                         line_mismatch; the order system books the line
//	                         first and its 409 refusals are answered as
//	                         they are; 503 line_check_unavailable without
//	                         it) + Idempotency-Key (required:
//	                         400 idempotency_key_missing), actor token aud
//	                         ledger, scope refund, call issue_refund, key the
//	                         request's Idempotency-Key
//	GET  /refunds?key=K      the entry recorded under key K (404 not_found)
//	GET  /entries            {"entries":[...]} in id order
//	POST /reversals          {"entry":"L3"} (+ Idempotency-Key), actor token
//	                         aud ledger, scope reverse, call reverse_refund,
//	                         key the request's Idempotency-Key (none if none)
//	POST /_sim/external-entries  {"order","amount","by"}: a finance clerk's
//	                         entry, made outside the sidecar (no token)
//	GET|PUT /_sim/faults     the fault counters (package fault); GET
//	                         also says how many requests a delay holds
//	POST /_sim/faults/release  ends the delays of the requests held now
//
// Every error is {"error":{"code","message"}}. Bodies are decoded strictly:
// one JSON object, no unknown or duplicate fields, no trailing data, amounts
// as positive integer cents (400 malformed_json, 422 unknown_field or
// invalid_field, 413 body_too_large).
//
// # Idempotency
//
// Keys work as Stripe's do. The first request with a key records its entry
// and the key together; the same key with the same parameters answers the
// recorded entry again with 200 and "Idempotent-Replayed: true"; the same
// key with other parameters is 409 idempotency_key_reused. The key lookup
// and the insert happen in one bbolt write transaction, so concurrent
// requests with one key make one entry. Keys never expire here; real
// services expire them (Stripe's after 24 hours), and a retry after that
// makes a second entry, which this simulator does not model. A refund
// must carry a key; a reversal without one makes an entry each time (it can
// be made once per refund anyway).
//
// # Tokens
//
// Every actor token is accepted once (401 token_replayed; the jtis are kept
// in ledger.db until the tokens expire, so a restart does not forget them).
// The jti is recorded in the transaction that makes the entry, so a refund
// is one commit, which concurrent requests share (see package simserver).
// A retry therefore carries a fresh token; with the same key it still gets
// the recorded entry back. A token carries the key it was minted for (claim
// key): used with another key, or none, it is 403 key_mismatch, so a
// captured refund token cannot make a second entry under a key of its own.
//
// # Entries
//
// Entries are numbered L1, L2 ... Kinds: "refund" (by the token's sub, with
// the agent from act.sub), "reversal" (a new entry that points at the refund
// it reverses; a refund is reversed at most once, 409 already_reversed) and
// "external" (a person's entry that no agent step made, which
// reconciliation reports as ledger_entry_without_step).
package ledger
