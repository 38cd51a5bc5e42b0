// Package fleet holds the tests of a fleet: several `countersign serve`
// processes on one PostgreSQL database (serve --store), one ledger, one
// order system and one identity provider.
//
// The first sidecar runs `serve --dev --store URL`: it starts the
// simulators and the dev identity provider and writes their addresses to
// its dev-endpoints.json. The others join with the production flags
// pointed at those addresses (--ledger, --orders, --issuer, --issuer-jwks)
// and the same --store; each has a data directory of its own. PostgreSQL
// comes from executor/pgtest; without it the tests skip with one line
// naming `bash .ci/run`.
//
// Until the sidecars share their signing keys (serve --key-file), the
// systems of record trust only the first sidecar's actor tokens, so the
// tests here dispatch through the first sidecar; the ones that need any
// sidecar to dispatch skip, saying so, while the binary has no --key-file.
//
// The package has no code of its own; the tests build the binary and start
// processes, and are skipped under -short.
package fleet
