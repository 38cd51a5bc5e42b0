// Package fleet holds the tests of a fleet: several `countersign serve`
// processes on one PostgreSQL database (serve --store), one ledger, one
// order system and one identity provider.
//
// The first sidecar runs `serve --dev --store URL`: it starts the
// simulators and the dev identity provider and writes their addresses to
// its dev-endpoints.json. The others join with the production flags
// pointed at those addresses (--ledger, --orders, --issuer, --issuer-jwks)
// and the same --store; each has a data directory of its own. All share
// one key file (serve --key-file), so every sidecar mints actor tokens
// with the fleet's key, which the first one's JWKS (the one the simulators
// read) publishes. PostgreSQL comes from executor/pgtest; without it the
// tests skip with one line naming `bash .ci/run`.
//
// The package has no code of its own; the tests build the binary and start
// processes, and are skipped under -short.
package fleet
