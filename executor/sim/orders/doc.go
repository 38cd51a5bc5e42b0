// Package orders is the simulated order system: a small HTTP server with its
// state in its own bbolt file, holding orders and their shipments. It is
// shipped for the demo and the tests and behaves the same in process
// (serve --dev) and alone (countersign sim orders).
//
// Like the ledger it verifies every actor token itself (package
// actorcheck) against the sidecar's JWKS and imports nothing of the sidecar
// or the engine. Each reship carries a reference (countersign derives it
// from the step), bound in the actor token (claim ref) and stored with the
// shipment, so that a caller whose answer was lost can find its own
// shipment by reference instead of guessing from a count that other
// callers' shipments change too.
//
// The reference is also the reshipment's idempotency key, as the ledger's
// Idempotency-Key is a refund's: a reship request under a reference
// already shipped makes no shipment and answers the first one (200,
// "Idempotent-Replayed: true"); under a reference that shipped another
// order it is refused (409 reference_reused). So a request that lands
// late, after its caller concluded it never would and asked again, still
// ships once. A real order system behind countersign must do the same
// (README, "Integrating a system of record"). Options.NoReferenceKey
// turns it off, for the tests that show it is load-bearing.
//
// Every actor token is accepted once (401 token_replayed, the jtis kept in
// orders.db until the tokens expire): a captured reship token posted three
// times makes one shipment. The jti is recorded in the transaction that
// records the shipment: one commit, shared by concurrent requests (see
// package simserver). A lookup's token, which only reads, is held to
// single use from memory, and the lookup commits nothing.
//
// # Endpoints
//
//	GET  /orders/{id}               actor token aud orders, scope lookup,
//	                                call lookup_order {"order":id}
//	POST /orders/{id}/shipments     actor token aud orders, scope reship,
//	                                call reship_order {"order":id}, ref R;
//	                                body {"reference":R} (none: 400
//	                                reference_missing; another than the
//	                                token's: 403 reference_mismatch); 201
//	                                {"id":"S1","order","reference","by","agent","at"};
//	                                a reference already shipped: 200 with
//	                                that shipment, or 409 reference_reused
//	                                when it shipped another order
//	GET  /orders/{id}/shipments     {"shipments":[...]} (a reporting read, no
//	                                token); ?reference=R only those carrying R
//	GET  /shipments                 every shipment, in id order (no token)
//	POST /orders/{id}/line-refunds  {"line","quantity","amount","key"}: the
//	                                ledger booking a line-item refund (no
//	                                token: between the systems of record);
//	                                409 line_not_found, line_not_refundable
//	                                (more than quantity - refunded_quantity),
//	                                line_amount_mismatch (not unit_amount ×
//	                                quantity), idempotency_key_reused; the
//	                                same booking under its key again is 200
//	                                and counts nothing more
//	POST /_sim/orders               add or replace an order (admin, no token)
//	POST /_sim/external-shipments   {"order","by"}: a shipment made outside
//	                                the sidecar (admin, no token)
//	GET|PUT /_sim/faults            the fault counters (package fault;
//	                                wrong_amount does not apply here); GET
//	                                also says how many requests a delay holds
//	POST /_sim/faults/release       ends the delays of the requests held now
//
// An order carries its lines, {"id","sku","description","unit_amount",
// "quantity","refunded_quantity"}, which add up to what was paid. The
// ledger is the system that pays refunds, this one the system that knows
// what was bought: refunded_quantity counts the units the ledger booked
// here before it made each line-item refund's entry, in the transaction
// that checks them, so two refunds cannot both take the last unit. (A
// reversal in the ledger does not give the units back; a person does.)
//
// An order is dated: placed_at, and shipped_at once shipped (RFC 3339),
// which a policy reads beside its input's now ("deny refunds on orders
// older than 90 days"). An order seeded or added without placed_at was
// placed then, by the system's clock (the simulated one under a drill or
// a seeded simulation, so the dates replay); one added as shipped without
// shipped_at shipped when it was placed.
//
// Orders are seeded from Options.Orders the first time the file is created;
// a reopened file keeps what it holds.
package orders
