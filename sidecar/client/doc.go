// Package client is a typed Go client for the countersign sidecar's /v1
// HTTP API (sidecar/openapi.json, API.md): what an integrator would
// otherwise write by hand, and what countersign's own MCP front and tests
// speak to the sidecar with.
//
// # Shape
//
// New takes the sidecar's base URL and a person's bearer token (a rep's
// for the agent endpoints, a lead's for approvals, an operator's for the
// switches, modes, epoch and audit). Every method sends that token and
// answers a typed value whose fields carry the API's JSON names; money is
// integer cents (money.Cents) throughout.
//
// # Errors
//
// Every answer outside 2xx becomes an *Error with the HTTP status and the
// API's error code, message and rule ({"error": {"code", "message",
// "rule"}}), so callers branch with errors.As:
//
//	var ae *client.Error
//	if errors.As(err, &ae) && ae.Code == "above_approver_limit" { ... }
//
// A denied step is both: ProposeStep answers the step (with its Error set,
// as the API's 403 body has it) and an *Error with the same code and rule.
// Transport failures (refused connection, cancelled context) are returned
// as they come, wrapped with the operation.
//
// # Decoding
//
// Answers are decoded leniently by default: API.md lets the server add
// fields, and an older client must keep working against a newer sidecar.
// Strict() makes the client refuse any field it does not know (and
// duplicate keys), which is how countersign's own tests hold the client and
// the server to one contract. Request bodies the client builds are always
// exactly the documented fields.
//
// # Transport
//
// WithHTTPClient injects the *http.Client; its Transport may be any
// http.RoundTripper, including one that serves the request in-process
// (the sidecar's /mcp front talks to its own handler that way).
package client
