// Package credential mints the per-call actor tokens that the systems of
// record (the ledger, the order system) verify on their own, and publishes
// the public key they verify with.
//
// # Why a token per call
//
// The agent never holds a credential for a system of record. For every
// dispatch attempt the engine asks the Authority for a short-lived JWT that
// carries exactly the delegation needed for that one call:
//
//	header  alg EdDSA, kid "epoch-N"
//	iss     "countersign"
//	sub     the representative whose authority is used
//	act     {"sub": agent id}                (RFC 8693 actor claim)
//	aud     "ledger" or "orders"              (one system, a single string)
//	scope   "refund" | "reship" | "lookup" | "reverse"
//	max     the representative's refund ceiling, integer cents
//	call    tool.CallHash of the exact call   (the receiver recomputes it)
//	jti     random and unique
//	iat     now;  exp = iat + TTL (60 s by default)
//	epoch   N, the same N as in the kid
//
// A receiver that checks signature, exp, aud, scope, amount <= max and the
// call binding bounds a wrong policy by the person's own delegation: even an
// ALLOW that should have been a DENY cannot refund more than the person may,
// nor anything other than the call that was decided.
//
// # Epochs and containment
//
// Each epoch has its own Ed25519 key. JWKS and JWKSJSON publish only the
// current epoch's public key (the sidecar serves it at
// /.well-known/jwks.json), so Raise, which switches to a fresh key, makes
// every token minted before it fail verification at once. That is the
// credential half of the kill switch.
//
// # Persistence
//
// Keys live under Options.Dir/keys (directory 0700, files 0600), one file per
// epoch named epoch-N.json holding the private JWK. Open loads the highest
// epoch, or creates epoch 1 when there is none, so a restarted sidecar keeps
// minting with the same key and the receivers keep verifying. Raise writes
// the new key to a temporary file, fsyncs it, renames it into place and
// fsyncs the directory before it switches, so a crash leaves either the old
// epoch or the new one in force, never a published key that is not on disk.
// Older epochs' private keys are deleted after a raise: a revoked key has no
// further use and should not lie around.
//
// One process owns a data directory (the store's file lock enforces it);
// the Authority does not coordinate with other processes.
//
// # What this package does not do
//
// It does not verify actor tokens. The systems of record verify them in
// their own packages against the published JWKS, exactly as an independent
// system would, and must not import this package.
package credential
