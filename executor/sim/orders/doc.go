// Package orders is the simulated order system: a small HTTP server with its
// state in its own bbolt file, holding orders and their shipments. It is
// shipped for the demo and the tests and behaves the same in process
// (serve --dev) and alone (countersign sim orders).
//
// Like the ledger it verifies every actor token itself (package
// actorcheck) against the sidecar's JWKS and imports nothing of the sidecar
// or the engine. Unlike the ledger it has no idempotency keys: every
// accepted reship request creates a shipment. That is why countersign calls
// it at most once and resolves a lost answer by counting shipments against
// the baseline it wrote ahead.
//
// # Endpoints
//
//	GET  /orders/{id}               actor token aud orders, scope lookup,
//	                                call lookup_order {"order":id}
//	POST /orders/{id}/shipments     actor token aud orders, scope reship,
//	                                call reship_order {"order":id}; body empty
//	                                or {}; 201 {"id":"S1","order","by","agent","at"}
//	GET  /orders/{id}/shipments     {"shipments":[...]} (a reporting read, no token)
//	GET  /shipments                 every shipment, in id order (no token)
//	POST /_sim/orders               add or replace an order (admin, no token)
//	POST /_sim/external-shipments   {"order","by"}: a shipment made outside
//	                                the sidecar (admin, no token)
//	GET|PUT /_sim/faults            the fault counters (package fault;
//	                                wrong_amount does not apply here)
//
// Orders are seeded from Options.Orders the first time the file is created;
// a reopened file keeps what it holds.
package orders
