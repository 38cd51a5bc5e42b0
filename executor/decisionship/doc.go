// Package decisionship ships the decision log to an HTTP sink in the
// shape OPA's own decision-log plugin sends (serve --decision-log-url), so
// that the tools that already read OPA's decision logs read countersign's.
// The engine hands it each decision once the decision has committed
// (cmd/stack wires it as an engine.Observer); this package imports nothing
// of the engine.
//
// # What is posted
//
// A POST of a gzip-compressed JSON array of events, with Content-Type
// application/json and Content-Encoding gzip, as OPA's Decision Log
// Service API describes it. Each [Event] is
//
//	{"labels": {"app": "countersign", "id": "...", "version": "..."},
//	 "decision_id": "...", "path": "countersign/call/decision",
//	 "input": {...}, "result": {"decision": "...", "rule": "..."},
//	 "bundles": {"countersign": {"revision": "...", "digest": "..."}},
//	 "requested_by": "rep-ana", "timestamp": "..."}
//
// labels.id names the sidecar (one id per process, as OPA's instance id),
// labels.version its build. requested_by is the person the call was
// decided for (the rep whose token the agent presented), where OPA writes
// the client's address: for a reviewer the person is the fact that
// matters, and the address of an agent's pod says nothing about who asked.
// The decision_id is the one GET /v1/decisions and the audit chain show,
// so a sink dedups on it when a batch is sent twice.
//
// # Batches, retries, the bounded buffer
//
// [Shipper.Ship] only appends to an in-memory buffer and returns; one
// goroutine sends. It sends what waits, in batches of at most BatchSize,
// as soon as BatchSize events wait and otherwise every FlushEvery, so an
// event waits at most FlushEvery while the sink takes batches. A batch
// the sink does not take (a network error, a timeout, any non-2xx answer)
// is sent again, the same events in the same order, after FirstBackoff,
// doubling up to MaxBackoff, for as long as it takes: like OPA, the
// shipper does not give up on a sink that is down, it waits for it.
//
// Meanwhile decisions go on arriving. The buffer holds at most BufferSize
// of them (besides the batch in flight); when it is full the OLDEST waiting
// event is dropped to make room, counted in
// countersign_decision_logs_dropped_total, and a warning is logged once
// each time the buffer fills (not once per event, which would flood the
// log exactly when something is wrong). Ship never waits: a decision is
// never held up by its log's sink. The newest events are the ones kept
// because a sink that comes back is most useful with the present.
//
// On a fleet each sidecar ships the decisions it made itself (the engine
// tells its own observer), so no decision is shipped twice by two
// sidecars; labels.id tells the sidecars apart.
//
// # What a sink may miss, and where the truth is
//
// The buffer is in memory. Close (the sidecar's graceful stop) sends what
// waits until its context ends and drops the rest, counted; a crash loses
// what waited. The decision log in the store (GET /v1/decisions,
// ?format=ndjson to stream it) and the hash-chained audit log keep every
// decision durably, in the transaction that made it: shipping is a copy
// for the tools outside, and a gap in the copy can be filled from there
// by decision_id.
package decisionship
