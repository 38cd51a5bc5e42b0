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
//	iat     now;  exp = iat + TTL (15 s by default, at most 120 s), or
//	        earlier: the step's token deadline (Claims.NotAfter)
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
// # Where the keys live
//
// A sidecar on bbolt keeps its keys in files (the default); a fleet of
// sidecars sharing a store keeps them in the store (Options.Store). The
// sidecar wiring (cmd/stack) chooses by the store: on PostgreSQL
// (store.DB.Shared) the keys live in the store and a key-encryption key is
// required; on bbolt, in files.
//
// # Keys in files
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
// # Keys in a shared store
//
// Every sidecar of a fleet mints with the same key, the current epoch's,
// and serves the same JWKS. The store keeps the current epoch and its
// private key (store.Tx.CredentialEpoch, SealedCredentialKey,
// PutCredentialKey; earlier epochs' keys are deleted as they are
// revoked). The private key never reaches the database in plain text: its
// Ed25519 seed is sealed with AES-256-GCM under the fleet's
// key-encryption key, a random nonce per seal, and "epoch-N" in the
// additional data, so a sealed key copied to another epoch's row does not
// open (a revoked key cannot be revived by moving it).
//
// The key-encryption key is given to each sidecar in a file (serve
// --key-file F): 32 random bytes in standard base64 on one line, made by
// `countersign keyfile -o F` (or `head -c 32 /dev/urandom | base64`).
// Every sidecar of a fleet needs the same one. Open refuses to start
// without one (ErrInvalidOptions and ErrKeyEncryptionKey) and with a wrong
// one (ErrKeyEncryptionKey: the current key does not open), saying what to
// do. Replacing a fleet's key-encryption key is not supported yet (it
// would reseal the current key under the new one).
//
// Other secrets a fleet keeps in its store are sealed with the same key
// through KeyEncryptionKey.Seal and Open (the lead's page seals the bearer
// tokens of its sessions). Their additional data begins differently from
// a signing key's and ends with the caller's label, so no sealed value
// opens as a signing key, nor a signing key as a value, nor a value under
// another label.
//
// Open reads the current key, or creates epoch 1 when the store has none;
// sidecars starting together on an empty store agree on one epoch 1, as
// the creation is one serializable write. Raise is one serializable
// write too: it reads the store's current epoch N, seals a fresh key for
// N+1 and makes it current, so concurrent raises through two sidecars
// end at distinct epochs (the loser's write runs again and goes above
// the winner's) and none is lost.
//
// # Noticing another sidecar's raise
//
// Before every Mint, and before serving the JWKS (JWKSJSON, JWKSHandler),
// the Authority reads the store's current epoch, and the sealed key too
// when the epoch moved: so a sidecar never mints with a key another
// sidecar has revoked, and its JWKS serves the new key as soon as anyone
// asks. If the read fails, Mint and the JWKS fail rather than use a key
// that may be revoked. On PostgreSQL on loopback the read costs 0.2 to
// 0.4 ms per token on a busy 2-core machine (BenchmarkMintSharedStore,
// 0.27-0.49 ms, against BenchmarkMint, 0.1 ms: one read-only
// transaction, three round trips), small beside the decision's
// own transactions and the call to the system of record the token is
// for. Checking on an interval instead, plus on a receiver's refusal for
// an unknown key, would save that read but leave a window in which a
// sidecar mints tokens already revoked; the read is the simpler rule and
// has no window. JWKS (the jwk.Set) does not read the store: it returns
// the key last noticed.
//
// # What this package does not do
//
// It does not verify actor tokens. The systems of record verify them in
// their own packages against the published JWKS, exactly as an independent
// system would, and must not import this package.
package credential
