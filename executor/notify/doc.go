// Package notify tells leads about approvals where they already are: it
// posts each approval requested, and each change of it (approved,
// rejected, expired, void, used), to one webhook (serve --notify-webhook).
// The engine hands it each approval that changed, after the change has
// committed (engine.Notifier); the engine imports nothing of this
// package, and this package nothing of the engine.
//
// # What is posted
//
// One JSON object per change, POSTed with Content-Type application/json:
//
//	{"text": "...", "event": "approval_requested", "approval": {...}, "url": "..."}
//
// text is what Slack-compatible incoming webhooks display: the approval's
// id, the call in dollars, the order, the rep who asked, the rule, and the
// link (values escaped as Slack asks, so an order id cannot forge a
// mention). event is approval_requested, approval_approved,
// approval_rejected, approval_expired, approval_void or approval_used.
// approval is the approval (Approval: id, workflow, n, tool, args,
// summary, requester, status, expires, rule, amount in cents, order). url
// is the lead's page at the approval's card: the sidecar's public base
// URL (serve --public-url) + /approvals#approval-<id>.
//
// # The signature
//
// Every post carries
//
//	Countersign-Signature: t=<unix seconds>,v1=<lowercase hex HMAC-SHA256 of "<t>.<body>">
//
// keyed with the secret of serve --notify-webhook-secret-file. The time is
// signed, so a receiver refuses a notice replayed later (Verify, with
// DefaultTolerance), and each attempt is signed afresh at the time it is
// made. The body of every attempt of one notice is the same bytes: a
// receiver that must not act twice on a retry keys on approval.id and
// event.
//
// # Never in the way of a decision
//
// ApprovalChanged only queues: a bounded channel (QueueSize) that one
// goroutine empties, posting one notice at a time in the order they were
// queued. A full queue drops the notice, counts it
// (countersign_notices_total{outcome="dropped"}) and logs it; it never
// waits, so a lead's approve answers at once however slow the receiver
// is.
//
// # Retries
//
//	answer                      what happens
//	2xx                         sent
//	network error, timeout      tried again
//	429, 5xx                    tried again
//	3xx                         failed (a redirect would turn the POST into
//	                            a GET: configure the URL it points to)
//	other 4xx                   failed (the receiver refuses it: the URL or
//	                            the secret is wrong; trying again won't help)
//
// At most Attempts posts (5), each bounded by AttemptTimeout (10 s), with
// FirstBackoff (1 s) before the second, doubling after: a notice is given
// up on after at most 5×10 s + 1+2+4+8 s, about 65 s, and counted
// failed. A sender stuck on such a receiver holds up the notices behind
// it, which then wait in the queue, or are dropped once it is full.
//
// # Lost on a crash, on purpose
//
// The queue is in memory: a notice queued when the sidecar crashes, or
// still being tried, is lost; on a graceful stop the sidecar sends what is
// queued for a few seconds, then drops the rest (counted). This is a
// choice, not an accident. A notice is a nudge; the approval itself is
// durable, listed on the lead's page and by GET /v1/approvals, which stay
// the place a lead acts from; every change is also in the audit log, in
// the transaction that made it. An outbox (the notice written in the
// change's own transaction, deleted once sent) would survive a crash, but
// it costs one more write per decision that asks for an approval and one
// more commit (an fsync on bbolt) per notice sent, and on a store a fleet
// shares it needs claims with expiry so that two sidecars do not both post
// a notice, or a dead sidecar's notices stay unsent: more machinery than a
// nudge is worth. Without one, each change is posted by the sidecar that
// made it, once.
//
// # What it does not see
//
// An approval expires lazily: it is recorded expired when someone next
// touches it (a lead's approve or reject, or the agent's resume, which
// requests a new one), and approval_expired is posted then, not at the
// moment it lapsed. A pending approval past its expiry cannot be approved,
// whether or not the notice has come.
package notify
