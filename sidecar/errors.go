package sidecar

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/countersign/countersign/executor/credential"
	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/release"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/strictjson"
	"github.com/countersign/countersign/executor/tool"
	"github.com/countersign/countersign/sidecar/authn"
	"github.com/countersign/countersign/sidecar/client"
	"github.com/countersign/countersign/sidecar/mcpfront"
)

// apiError is an answer of the contract's error shape.
type apiError struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
	Rule    string `json:"rule,omitempty"`
	// failures, for gate_failed only, are answered beside "error".
	failures []client.GateFailure
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

func newError(status int, code, format string, args ...any) *apiError {
	return &apiError{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// classify maps an error from any layer to the contract's status and code.
// Messages of internal errors stay in the log; the client gets the request id.
func classify(err error) *apiError {
	var ae *apiError
	var he *echo.HTTPError
	var ue *authn.Error
	var se *tool.SchemaError
	var ie *engine.InvalidError
	var ar *engine.ApprovalRefused
	var ge *policy.GateError
	var fe *policy.ForbiddenBuiltinError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &ue):
		return &apiError{Status: http.StatusUnauthorized, Code: string(ue.Code), Message: ue.Message}
	case errors.Is(err, mcpfront.ErrForbiddenOrigin):
		// The detail (which origin) stays in the log: the page that sent
		// it learns only that it may not call.
		return newError(http.StatusForbidden, "forbidden_origin",
			"/mcp does not accept requests from this web page's origin; an operator may allow it with serve --mcp-allowed-origins. Clients that are not browsers send no Origin header")
	case errors.Is(err, authn.ErrUnauthenticated):
		return newError(http.StatusUnauthorized, "unauthenticated", "%v", err)
	case errors.Is(err, strictjson.ErrMalformed):
		return newError(http.StatusBadRequest, "malformed_json", "%v", err)
	case errors.Is(err, strictjson.ErrUnknownField), errors.Is(err, strictjson.ErrType):
		return newError(http.StatusUnprocessableEntity, "invalid_request", "%v", err)
	case errors.As(err, &se):
		return newError(http.StatusUnprocessableEntity, "invalid_args", "%v", se)
	case errors.As(err, &ie):
		return newError(http.StatusUnprocessableEntity, "invalid_request", "%v", ie)
	case errors.Is(err, engine.ErrAmountMismatch):
		return newError(http.StatusUnprocessableEntity, "amount_mismatch", "%v", err)
	case errors.Is(err, tool.ErrUnknownTool):
		return newError(http.StatusNotFound, "unknown_tool", "%v", err)
	case errors.As(err, &ar):
		return newError(http.StatusForbidden, ar.Code, "%s", refusalMessage(ar.Code))
	case errors.Is(err, engine.ErrNotFound):
		return newError(http.StatusNotFound, "not_found", "%v", err)
	case errors.Is(err, engine.ErrForbidden):
		return newError(http.StatusForbidden, "forbidden", "%v", err)
	case errors.Is(err, engine.ErrWorkflowExists):
		return newError(http.StatusConflict, "workflow_exists", "%v; use another id (or leave id out for one made for you), or, if you opened it, repeat the first request exactly to get it", err)
	case errors.Is(err, engine.ErrNotAmendable):
		return newError(http.StatusConflict, "step_not_amendable", "%v; propose a new step instead", err)
	case errors.Is(err, engine.ErrNotCompensable):
		return newError(http.StatusConflict, "not_compensable", "%v", err)
	case errors.Is(err, engine.ErrNotPending):
		return newError(http.StatusConflict, "not_pending", "%v", err)
	case errors.Is(err, engine.ErrFenced):
		return newError(http.StatusConflict, "workflow_taken_over",
			"another sidecar took this workflow over while this one was held up, so nothing more was recorded here; read the workflow again")
	case errors.As(err, &ge):
		return &apiError{Status: http.StatusUnprocessableEntity, Code: "gate_failed",
			Message:  "the candidate bundle failed the gate; the active bundle is unchanged",
			failures: gateFailures(ge.Report)}
	case errors.As(err, &fe):
		return newError(http.StatusUnprocessableEntity, "bundle_forbidden_builtin",
			"the bundle calls %s in %s:%d, which policies may not use (network, clock, randomness); the active bundle is unchanged",
			fe.Builtin, fe.File, fe.Row)
	case errors.Is(err, policy.ErrSameOperator):
		return newError(http.StatusForbidden, "same_operator", "%v", err)
	case errors.Is(err, release.ErrActiveChanged):
		return newError(http.StatusConflict, "active_bundle_changed", "%v", err)
	case errors.Is(err, release.ErrNotAwaiting):
		return newError(http.StatusConflict, "not_pending", "%v", err)
	case errors.Is(err, store.ErrNotFound):
		return newError(http.StatusNotFound, "not_found", "%v", err)
	case errors.Is(err, policy.ErrSignatureInvalid):
		return newError(http.StatusUnprocessableEntity, "bundle_signature_invalid",
			"%v; this sidecar requires bundles signed with its verification key (sign with countersign bundle build --signing-key "+
				"or opa build --signing-key). The active bundle is unchanged", err)
	case errors.Is(err, policy.ErrNoTests):
		return newError(http.StatusUnprocessableEntity, "bundle_without_tests",
			"the bundle has no Rego tests of its own; add *_test.rego files with test_ rules. The active bundle is unchanged")
	case errors.Is(err, policy.ErrBundleTooLarge):
		return newError(http.StatusRequestEntityTooLarge, "bundle_too_large", "%v; a bundle may be %d bytes packed, %d unpacked, %d entries",
			err, policy.MaxArchiveBytes, policy.MaxUnpackedBytes, policy.MaxFiles)
	case errors.Is(err, policy.ErrTimeout):
		return newError(http.StatusServiceUnavailable, "policy_timeout",
			"the policy did not answer in time, so nothing was decided; retry, and tell an operator if it persists")
	case errors.Is(err, policy.ErrInvalidBundle):
		return newError(http.StatusUnprocessableEntity, "invalid_bundle", "%v", err)
	case errors.Is(err, policy.ErrNoBundle):
		return newError(http.StatusServiceUnavailable, "not_ready", "no policy bundle is active; an operator must activate one")
	case errors.Is(err, engine.ErrUnavailable):
		return newError(http.StatusServiceUnavailable, "system_unavailable", "%v", err)
	case errors.Is(err, store.ErrUnavailable):
		return newError(http.StatusServiceUnavailable, "store_unavailable",
			"the store cannot be reached, so nothing was changed that this answer would confirm; retry shortly (a resume settles any step that had started), and tell an operator if it persists")
	case errors.Is(err, store.ErrConflict):
		return newError(http.StatusServiceUnavailable, "store_busy",
			"the store was too busy to commit this change; retry the request (a resume settles any step that had started)")
	case errors.Is(err, credential.ErrKeyStore):
		return newError(http.StatusServiceUnavailable, "key_store_unavailable",
			"the signing keys could not be read from the store, so no key is published or used; retry, and tell an operator if it persists")
	case errors.As(err, &he):
		return httpError(he)
	}
	return newError(http.StatusInternalServerError, "internal", "internal error; quote the request id when you report it")
}

func httpError(he *echo.HTTPError) *apiError {
	switch he.Code {
	case http.StatusNotFound:
		return newError(he.Code, "not_found", "no such endpoint; see /openapi.json")
	case http.StatusMethodNotAllowed:
		return newError(he.Code, "method_not_allowed", "method not allowed on this endpoint")
	case http.StatusRequestEntityTooLarge:
		return newError(he.Code, "body_too_large", "request body is over the limit of 1 MiB")
	case http.StatusUnauthorized:
		return newError(he.Code, "unauthenticated", "send Authorization: Bearer <token>")
	}
	return newError(he.Code, "http_error", "%v", he.Message)
}

func refusalMessage(code string) string {
	switch policy.Refusal(code) {
	case policy.RequesterCannotApprove:
		return "the rep who requested the call cannot approve it; ask a lead of the region"
	case policy.ApproverNotLead:
		return "only a lead can approve"
	case engine.ForbiddenRole:
		return "only a lead approves or rejects, whatever the policy bundle says; ask a lead of the requester's region"
	case policy.ApprovalExpired:
		return "the approval expired; the agent's next resume requests a new one"
	case policy.ApproverOutsideRegion:
		return "the approver must be a lead of the requester's region"
	case policy.AboveApproverLimit:
		return "the amount is above the approver's limit; ask a lead whose limit covers it"
	}
	return "approval refused by the approver rules"
}

// errorHandler is the server's one HTTPErrorHandler.
func (s *Server) errorHandler(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	ae := classify(err)
	rid := c.Response().Header().Get(echo.HeaderXRequestID)
	// A 5xx's error is in the request's log line (requestLog), at ERROR
	// with the id the client sees.
	if ae.Status == http.StatusUnauthorized {
		c.Response().Header().Set("WWW-Authenticate", s.challenge(c))
	}
	ae.Message = clipTo(ae.Message, maxMessage) // it may repeat what the client sent
	// The body is the client's: client.ErrorBody, or with the failures
	// of a gate_failed, client.GateFailedBody.
	var body any = client.ErrorBody{Error: &client.Error{Code: ae.Code, Message: ae.Message, Rule: ae.Rule}, RequestID: rid}
	if ae.failures != nil {
		body = client.GateFailedBody{ErrorBody: body.(client.ErrorBody), Failures: ae.failures}
	}
	var werr error
	if c.Request().Method == http.MethodHead {
		werr = c.NoContent(ae.Status)
	} else {
		werr = c.JSON(ae.Status, body)
	}
	if werr != nil {
		s.log.Warn("writing error response", "request_id", rid, "err", werr)
	}
}

// decodeJSON decodes a request body with strictjson: JSON content type, one
// value, no duplicate or case-variant names at any depth (400
// malformed_json), no unknown fields and no wrong types (422).
func decodeJSON(c echo.Context, v any) error {
	if err := jsonContent(c); err != nil {
		return err
	}
	body, err := readBody(c.Request().Body)
	if err != nil {
		return err
	}
	return strictjson.Decode(body, v) // classify answers its refusals
}

// optionalBody decodes the body of an endpoint whose members are all
// optional into v: an empty body passes as none; any other is read as
// decodeJSON reads one (a wrong content type 400, an unknown member 422),
// so that a request meant for another endpoint never passes here.
func optionalBody(c echo.Context, v any) error {
	if c.Request().ContentLength == 0 {
		return nil
	}
	body, err := readBody(c.Request().Body)
	if err != nil || len(body) == 0 { // an empty chunked body is none too
		return err
	}
	if err := jsonContent(c); err != nil {
		return err
	}
	return strictjson.Decode(body, v)
}

// jsonContent refuses a body that is not plainly JSON: another content
// type, two Content-Type headers (readers may take either), or a content
// encoding (the body is read as it comes, never decompressed).
func jsonContent(c echo.Context) error {
	h := c.Request().Header
	if ct := h.Values(echo.HeaderContentType); len(ct) != 1 || !isJSON(ct[0]) {
		return newError(http.StatusBadRequest, "unsupported_content_type", "send one Content-Type: application/json")
	}
	if ce := h.Get(echo.HeaderContentEncoding); ce != "" && !strings.EqualFold(ce, "identity") {
		return newError(http.StatusBadRequest, "unsupported_content_encoding", "send the body uncompressed, without Content-Encoding")
	}
	return nil
}

// readBody reads a request's whole body: a decoder stops at the end of the
// first value and would miss both trailing data and a body that passes the
// limit in its last read.
func readBody(r io.Reader) ([]byte, error) {
	body, err := io.ReadAll(r)
	var ne net.Error
	switch {
	case err == nil:
		return body, nil
	case overLimit(err):
		return nil, echo.ErrStatusRequestEntityTooLarge
	case errors.As(err, &ne) && ne.Timeout():
		return nil, newError(http.StatusBadRequest, "unreadable_body", "the body did not arrive within %s; send it at once, as announced", BodyTimeout)
	}
	return nil, newError(http.StatusBadRequest, "unreadable_body", "the body could not be read whole: send exactly the bytes Content-Length announces, or chunked")
}

// noBody is optionalBody for an endpoint that takes no member at all.
func noBody(c echo.Context) error { return optionalBody(c, &struct{}{}) }

// overLimit reports whether reading a body failed because it passed the
// body limit. A body of unknown length (chunked) passes the Content-Length
// check of the BodyLimit middleware and fails only while being read, with
// the middleware's own 413 error rather than an *http.MaxBytesError.
func overLimit(err error) bool {
	var mbe *http.MaxBytesError
	var he *echo.HTTPError
	return errors.As(err, &mbe) || errors.As(err, &he) && he.Code == http.StatusRequestEntityTooLarge
}

func isJSON(ct string) bool {
	mt, _, _ := mime.ParseMediaType(ct)
	return mt == "application/json"
}

// gateFailures lists what a rejected bundle failed, in the contract's shape.
// An undeclared limit change and a failing Rego test have no amount; a
// case carries its rules, without which one that failed on its rule alone
// would read "expected REQUIRE_APPROVAL, got REQUIRE_APPROVAL".
func gateFailures(r policy.Report) []client.GateFailure {
	out := []client.GateFailure{}
	for _, f := range r.LimitFailures {
		out = append(out, client.GateFailure{Case: f.Case, Expected: f.Expected, Got: f.Got})
	}
	for _, f := range r.FailedCases() {
		out = append(out, client.GateFailure{Case: f.Case, Amount: &f.Amount, Expected: f.Expected, Got: f.Got,
			ExpectedRule: f.ExpectedRule, GotRule: f.GotRule})
	}
	for _, name := range r.TestFailures {
		out = append(out, client.GateFailure{Case: "rego test " + name, Expected: "pass", Got: "fail"})
	}
	return out
}

// How much of a client's own input an error message repeats (maxEcho),
// and how long any error message may be (maxMessage): an answer never
// grows with what the client sent, in a field, a path or a header.
const (
	maxEcho    = 64
	maxMessage = 600
)

// clip is s as an error message repeats it.
func clip(s string) string { return clipTo(s, maxEcho) }

// clipTo is s whole up to max bytes, else its start (whole runes) and its
// length.
func clipTo(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", s[:cut], len(s))
}
