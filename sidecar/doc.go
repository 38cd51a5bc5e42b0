// Package sidecar is countersign's HTTP face: the Echo server with the
// routes of the contract in openapi.json (served at /openapi.json), bearer
// authentication and roles, the 1 MiB body limit, strict JSON decoding, and
// the one error handler that maps every error to the stable codes of the
// contract with a request id the client also sees.
//
// Everything behind the routes lives in executor: the sidecar decodes,
// authenticates, calls the engine and encodes. It never decides.
//
// /mcp is the MCP front (package mcpfront) behind the same authentication:
// its tools call this server's own /v1 routes in-process with the caller's
// bearer token, so MCP answers exactly what /v1 answers.
package sidecar
