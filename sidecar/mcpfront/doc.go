// Package mcpfront serves countersign's governed tools over the Model
// Context Protocol (the official Go SDK), so that an agent, or a lead's own
// assistant, reaches the sidecar from where it already is.
//
// # One implementation, two transports
//
// NewServer builds the MCP server of one session over a *client.Client:
// every tool is a call of the sidecar's /v1 API, and every answer is what
// /v1 answered. The front decides nothing: it never validates a call's
// arguments itself, never approves, never executes. Bad input therefore
// gets the API's own answer (its code in the error result), and nothing
// runs through MCP that /v1 would not run.
//
//   - Streamable HTTP at /mcp on the sidecar (NewHandler, mounted in
//     sidecar/routes.go): the bearer is the person's token, verified by the
//     sidecar exactly as on /v1 before the request reaches this package. The
//     client talks to the sidecar's own handler in-process, presenting the
//     bearer of the MCP request being served, so each tool call is
//     authenticated again as the call it is. A session stays with the token
//     subject that opened it (another subject on its id: 403).
//   - stdio (`countersign mcp`): the same server, forwarding to a sidecar's
//     URL over HTTP with the token of a file.
//
// # Tool sets
//
// The token's role decides the tools of a session (on stdio, --lead):
//
//	rep      the catalog of GET /v1/tools (names, descriptions and
//	         annotations as given, input schemas with workflow and
//	         ticket added), countersign_status, countersign_wait
//	others   approvals_pending, approval_get, approval_approve,
//	         approval_reject; the approver is always the token's subject,
//	         never an argument, and the API's approval floor and
//	         approver rules decide
//
// # One session, many workflows
//
// Every tool of a rep's session takes two optional arguments, workflow and
// ticket, that name the workflow the call works in; a call that names
// neither works in the session's default: the one Countersign-Workflow
// and Countersign-Ticket name (stdio: --workflow, --ticket), read from the
// request that opens the session, or else the session's own, ticket
// "mcp-<MCP session id>" (stdio, which has none: a ULID). A call names its
// workflow as a whole: its arguments are never mixed with the defaults.
//
//	workflow and ticket   a governed call opens it (its proposal carries
//	                      the ticket: created with the step, or found again
//	                      when the same rep opened it with the same ticket;
//	                      409 workflow_exists for another ticket)
//	workflow alone        that workflow as it is: nothing is created, and
//	                      one that does not exist is the API's not_found
//	ticket alone          the last workflow this session worked in for the
//	                      ticket; a governed call opens one when there is
//	                      none (the front chooses its id, W-<ULID>)
//
// A governed call is one request to the API either way: POST
// /v1/workflows/{id}/steps with the ticket opens the workflow in the
// transaction that admits the step, so a call the API refuses (bad
// arguments, a taken id) opens nothing.
//
// countersign_status and countersign_wait never create a workflow: one
// that does not exist, or a ticket this session has not worked for, is an
// error result with code not_found. A catalog tool's schema is served
// with workflow and ticket added to its properties (still
// additionalProperties false), and the front takes them out of the
// arguments it passes to /v1, which are otherwise sent as they came. A
// catalog tool with an argument of either name of its own is served as
// given and works in the session's default workflow.
//
// # Annotations
//
// Every tool carries MCP tool annotations: the catalog's as GET /v1/tools
// gives them (lookup_order read-only; issue_refund and reship_order
// destructive, and idempotent within a workflow, which suppresses a
// repeat of a call); countersign_status, approvals_pending and
// approval_get read-only; countersign_wait not (it resumes the workflow,
// and an approved step runs then); approval_approve and approval_reject
// not read-only and not destructive (they record a decision). None is
// open-world. They are hints for a host, never a control.
//
// # Origins
//
// A web page can send requests to /mcp from a person's browser, and DNS
// rebinding lets a page on an attacker's name reach a sidecar on a
// private address with the browser taking it for the page's own origin,
// so no cross-origin check stops it. The MCP transport's rule is that a
// server validates the Origin header: [Origins] (serve --mcp-allowed-origins, none by default) holds
// the origins whose pages may call, and the sidecar refuses any other
// with 403 forbidden_origin. In the order the checks run:
//
//	no Origin header                 admitted: a client that is not a
//	                                 browser (the SDKs, countersign mcp)
//	                                 sends none, and works as it always did
//	two or more Origin headers       403: a proxy and the sidecar could
//	                                 each read a different one
//	"null"                           403 unless "null" is listed (any
//	                                 sandboxed frame or file: page sends it)
//	not one serialised origin        403
//	an origin not listed             403, compared after normalising
//	                                 (scheme and host in lower case, the
//	                                 default port left out)
//	a listed origin                  on to the bearer token, as without one
//
// The Origin is checked before the bearer token, so a foreign page gets
// 403 forbidden_origin whether it sends a token, a bad one or none. It
// could otherwise tell from a 401's code (token_missing, token_expired,
// ...) and its WWW-Authenticate challenge what the sidecar expects; a
// page in a browser holds no bearer token for /mcp anyway (the API uses
// no cookies), so the refusal it sees says only that its origin is not
// allowed. The body does not repeat the Origin or list the allowed ones.
//
// # What a governed call answers
//
// A catalog tool's call is POST /v1/workflows/{id}/steps with the call's
// arguments as they came. The result's structured content is the step as
// the API answers it; its text says what happened in words a model acts
// on:
//
//	done                result in the step; not an error
//	waiting_approval    not an error: the approval's id, summary and expiry,
//	                    and "call countersign_wait"
//	denied              an error result naming the rule and why (the
//	                    step's error object: policy_denied or
//	                    refused_downstream)
//	held, suppressed,   not errors: what each means and what to do next
//	unknown, shadowed
//	any API error       an error result whose structured content is
//	                    {"error": {"code", "message", "rule"?}, "status"}:
//	                    the API's error object (invalid_args, unknown_tool,
//	                    not_found, ...) and its HTTP status
//
// countersign_wait waits for the workflow to change (GET
// /v1/workflows/{id}?wait=, each wait at most PollInterval) until no step
// waits on a pending, unexpired approval (at most 60 s), then resumes the
// workflow and answers it; if approvals are still pending at the end it
// answers the workflow as it stands and asks to be called again.
//
// A step's text ends with why, when the sidecar says it: the reason's
// text and what can be done next, and a lead's comment on the approval
// (approval_comment), so that an agent can tell the person.
package mcpfront
