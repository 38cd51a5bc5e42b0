// Package client is a typed Go client for the countersign sidecar's /v1
// HTTP API, whose contract is sidecar/openapi.json (served by every
// sidecar at /openapi.json): what an integrator would otherwise write by
// hand, and what countersign's own MCP front and tests speak to the
// sidecar with.
//
// # Shape
//
// New takes the sidecar's base URL and a person's bearer token (a rep's
// for the agent endpoints, a lead's for approvals, an operator's for the
// switches, modes, epoch, bundles, decision log, audit and
// reconciliation). Every method sends that token and answers a typed
// value whose fields carry the API's JSON names; money is integer cents
// (money.Cents) throughout.
//
// The calls, by who makes them:
//
//   - an agent (a rep's token): Tools, CreateWorkflow, ProposeStep,
//     AmendStep, Resume, Workflow, WaitWorkflow, Workflows;
//   - a lead: Approvals, Approval, Approve, Reject (and the workflows and
//     the decision log);
//   - an operator: Switches, SetSwitch, Modes, SetMode, RaiseEpoch;
//     BundleHistory, ActiveBundle, Bundle, BundleArchive, UploadBundle, DryRunBundle,
//     ApproveBundle, ActivateBundle; Decisions, ExportDecisions; Audit,
//     VerifyAudit; Reconcile, LatestReconciliation.
//
// # Wire types
//
// The types of this package are the API's bodies themselves: the sidecar
// answers with these same Go types, and its OpenAPI test holds each of
// them to sidecar/openapi.json field by field, so the client and the
// server cannot drift apart. The sidecar builds them, at its edge, from
// the store's records and the engine's reports, which keep their own
// types; this package imports nothing of the sidecar or the engine, so a
// client stays a small dependency.
//
// # Waiting for a workflow
//
// A workflow's answer carries its version (the ETag). WaitWorkflow takes
// the version the caller last saw and answers as soon as the workflow is
// past it, at once for a change made before the call, so a loop that
// passes each answer's version back misses no change.
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
// A bundle the gate refuses is a 422 gate_failed *Error whose Failures
// list the failing cases.
// Transport failures (refused connection, cancelled context) are returned
// as they come, wrapped with the operation.
//
// # Decoding
//
// Answers are decoded leniently by default: the contract lets the server
// add fields, and an older client must keep working against a newer
// sidecar.
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
