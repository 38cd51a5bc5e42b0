// Package audit is countersign's tamper-evident record of what happened: every
// decision, approval transition, dispatch and result, switch change, epoch
// raise, bundle activation attempt, compensation and alert.
//
// # Where it lives
//
// The log is a bucket of the state's own bbolt file (executor/store), and a
// record is appended with [Log.Append] inside the caller's write transaction:
// the engine appends the record of a state change in the same Update that
// makes the change, so the two commit together or not at all. A crash can
// lose neither a record of something that happened nor invent a record of
// something that did not.
//
// # The chain
//
// Each [Record] carries the hash of the record before it (Prev, "" for the
// first) and its own hash. Since version 1 ([VersionJCS], the record's
// "version" member) the hash is
//
//	Hash = hex(sha256(JCS(the record as stored, without its "hash" member)))
//
// where JCS is RFC 8785, the JSON Canonicalization Scheme (package
// executor/audit/jcs): members sorted by UTF-16 code units, no white
// space, strings escaped only where JSON must, numbers as ECMAScript
// writes them. Any JCS implementation recomputes it from an exported
// line: in a shell, `jq -c 'del(.hash)'` piped through a JCS tool and
// sha256sum. Prev is inside the canonical form, so the hash covers the
// link.
//
// A record without "version" was chained before version 1, by the legacy
// rule: hex(sha256(Prev + "\n" + the record without Hash as Go's encoder
// writes it, keys sorted, no white space)). It keeps verifying by that
// rule; Go's encoder escapes <, > and & (as \u003c ...), which is why a
// generic "sorted keys" script disagreed with it and the rule changed.
// The version is inside the hashed form, so it cannot be changed without
// changing the hash; a version this build does not know is reported as
// [ReasonVersion]. A fleet's record waits unversioned and gets the rule
// of the sidecar that chains it (Sequence).
//
// Record ids are ULIDs: they sort by time,
// so the store's key order is the chain's order, and they increase strictly
// even when the injected clock stands still or goes back.
//
// [Verify] walks the log in key order and reports the FIRST broken link: a
// value that does not decode, a Prev that is not the previous record's Hash
// (a record was deleted or the records were reordered), a Hash that does not
// recompute (a record was edited), or an id inside a record that is not the
// key it is stored under. Editing a record and recomputing its hash moves the
// break to the next record, whose Prev no longer matches; rewriting the whole
// tail needs the file and is what an external anchor catches: a signed
// checkpoint (below). Truncating the tail is likewise visible only against
// such an anchor.
//
// # Checkpoints
//
// A [Checkpoint] is the sidecar's signed statement that the first Position
// records of the chain end with record ID, whose hash is Head, at At:
// Ed25519 over the RFC 8785 form of those members and the key id (the RFC
// 7638 thumbprint of the public key, so anyone recomputes it). The key is
// the sidecar's own ([Signer], [LoadOrCreateKey]) and signs nothing else.
// [Log.Checkpoint] signs one when [CheckpointRule] says it is due (every N
// records, or T with at least one record), reading first and writing only
// then; it is stored beside the chain, append-only. [Checkpointer] runs it
// and posts each stored checkpoint to a sink outside the sidecar's reach,
// from the store as its outbox (at least once, with backoff, nothing held in
// memory, never in a call's way).
//
// On a fleet the sidecar that holds the sequencer lease signs (taking it
// when it is free), so a checkpoint covers a chain no other sidecar is
// extending; each sidecar signs with its own key and registers the public
// half in the store ([RegisterKey], [Keys]), so any of them publishes all.
//
// [Verify] matches the store's chain against its stored checkpoints too,
// with the keys the store registers: that catches a rewrite or a cut tail
// that left the checkpoints alone, not one whose author also registered a
// key of their own. [VerifyExport] checks an exported file offline, with
// keys the reviewer obtained apart: every record as Verify
// checks the store, and every checkpoint's signature against keys the
// reviewer trusts and its head against the record at its position. Whoever
// rewrites the whole store recomputing every hash, without a key, fails at
// the first checkpoint after the change; whoever truncates it, at the
// checkpoint beyond the end. What stands after the last checkpoint is
// proven by the chain alone until the next one.
//
// # What a decision record names
//
// A workflow's opening is a [KindWorkflow] record (the rep as actor, the
// agent, its version, the ticket, the revision and the bounds). A decision
// record names the rule, the revision, the bundle's digest (a revision is
// only a name), the decision log's id (decision_id), the agent and its
// version; a dispatch record the agent. These are plain members of Detail,
// which GET /v1/audit answers as stored.
//
// # Arguments yes, tokens never
//
// A record keeps the tool arguments (they are what a reviewer needs), but
// [Log.Append] refuses a record holding anything that looks like a JWT
// ([ErrToken]). The log is append-only and chained: a token written into it
// could never be removed without breaking the chain, and anyone allowed to
// read the audit (GET /v1/audit, a copy of the file in a backup or a ticket)
// could replay it until it expires. Record a token's jti, kid, audience and
// scope instead; they identify it without granting anything.
package audit
