package sidecar_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/cmd/devstack"
	"github.com/countersign/countersign/sidecar"
)

// TestEndpointsWithoutABodyRefuseOne: the epoch raise, a resume and a
// reconciliation take no body. None, or {}, is accepted; another content
// type is a 400 and a member a 422, as where a body is expected, and the
// epoch stays where it was.
func TestEndpointsWithoutABodyRefuseOne(t *testing.T) {
	e := start(t, devstack.Options{})
	e.open(t, "rep-ana", "W1")
	bearer := func(who string) http.Header {
		return http.Header{"Authorization": {"Bearer " + e.st.Tokens[who]}}
	}
	epoch := func() string { return strings.Join(jwksKids(t, e), ",") } // the published keys
	before := epoch()
	for _, tc := range []struct {
		path, who string
	}{
		{"/v1/credentials/epoch", "ops-ida"},
		{"/v1/workflows/W1/resume", "rep-ana"},
		{"/v1/reconciliations", "ops-ida"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			h := bearer(tc.who)
			h.Set("Content-Type", "text/plain")
			e.send(t, http.MethodPost, tc.path, h, strings.NewReader("zzz")).want(t, http.StatusBadRequest, "unsupported_content_type")
			e.call(t, http.MethodPost, tc.path, tc.who, map[string]int{"x": 1}).want(t, http.StatusUnprocessableEntity, "invalid_request")
		})
	}
	if after := epoch(); after != before {
		t.Fatalf("the refused raises changed the published keys: %s, then %s", before, after)
	}
	e.call(t, http.MethodPost, "/v1/credentials/epoch", "ops-ida", map[string]int{}).want(t, http.StatusOK, "")
	e.send(t, http.MethodPost, "/v1/workflows/W1/resume", bearer("rep-ana"), nil).want(t, http.StatusOK, "")

	// The raise takes an optional reason, checked before anything rotates,
	// and kept in the audit record.
	keys := epoch()
	e.call(t, http.MethodPost, "/v1/credentials/epoch", "ops-ida", map[string]string{"reason": "two\nlines"}).want(t, http.StatusUnprocessableEntity, "invalid_request")
	if epoch() != keys {
		t.Fatal("a raise with a refused reason rotated the key")
	}
	e.call(t, http.MethodPost, "/v1/credentials/epoch", "ops-ida", map[string]string{"reason": "token leaked in INC-42"}).want(t, http.StatusOK, "")
	var page struct {
		Records []struct {
			Kind   string         `json:"kind"`
			Detail map[string]any `json:"detail"`
		} `json:"records"`
	}
	e.call(t, http.MethodGet, "/v1/audit?limit=1000", "ops-ida", nil).decode(t, &page)
	last := page.Records[len(page.Records)-1]
	if last.Kind != "epoch" || last.Detail["reason"] != "token leaked in INC-42" {
		t.Errorf("the last audit record is %+v, want the raise with its reason", last)
	}
}

// TestRequestIDs: a client's X-Request-Id comes back when it is a usable
// id, and is replaced by one the server makes when it is not.
func TestRequestIDs(t *testing.T) {
	e := start(t, devstack.Options{})
	for _, tc := range []struct {
		sent string
		kept bool
	}{
		{"trace-42.a_b", true},
		{strings.Repeat("a", 128), true},
		{strings.Repeat("a", 129), false},
		{"<script>alert(1)</script>", false},
		{"a b", false},
	} {
		r := e.send(t, http.MethodGet, "/healthz", http.Header{"X-Request-Id": {tc.sent}}, nil)
		got := r.header.Get("X-Request-Id")
		if kept := got == tc.sent; kept != tc.kept || got == "" {
			t.Errorf("sent %.40q: answered id %.40q; kept %v, want %v", tc.sent, got, kept, tc.kept)
		}
	}
}

// TestWorkflowIDs: an id that is present must be one; a repeated open
// that differs says how to its own rep, and to another only that the id
// is taken.
func TestWorkflowIDs(t *testing.T) {
	e := start(t, devstack.Options{})
	e.call(t, http.MethodPost, "/v1/workflows", "rep-ana", map[string]any{"ticket": "T-1", "id": ""}).want(t, http.StatusUnprocessableEntity, "invalid_request")
	e.call(t, http.MethodPost, "/v1/workflows", "rep-ana", map[string]any{"ticket": "T-1", "id": nil}).want(t, http.StatusCreated, "")
	e.call(t, http.MethodPost, "/v1/workflows", "rep-ana", map[string]any{"ticket": "T-1", "id": "W1"}).want(t, http.StatusCreated, "")
	for _, tc := range []struct {
		who  string
		body map[string]any
		says string
	}{
		{"rep-ben", map[string]any{"ticket": "T-1", "id": "W1"}, `taken: "W1"; use another id`},
		{"rep-ana", map[string]any{"ticket": "T-2", "id": "W1"}, "for another ticket"},
		{"rep-ana", map[string]any{"ticket": "T-1", "id": "W1", "agent_version": "v2"}, "with another agent_version"},
	} {
		r := e.call(t, http.MethodPost, "/v1/workflows", tc.who, tc.body)
		r.want(t, http.StatusConflict, "workflow_exists")
		if msg := r.errorOf(t).Message; !strings.Contains(msg, tc.says) {
			t.Errorf("%s %v: message %q does not say %q", tc.who, tc.body, msg, tc.says)
		}
	}
}

// TestQueryValuesAreClipped: an error repeats at most the start of what
// the client sent.
func TestQueryValuesAreClipped(t *testing.T) {
	e := start(t, devstack.Options{})
	long := strings.Repeat("x", 100_000)
	r := e.call(t, http.MethodGet, "/v1/workflows?status="+long, "rep-ana", nil)
	r.want(t, http.StatusBadRequest, "invalid_query")
	if n := len(r.body); n > 1000 {
		t.Errorf("a 100 kB status is answered in %d bytes", n)
	}
}

// TestASlowBodyIsCutOff: a client that announces a body and never sends
// it is answered, and its connection closed, once BodyTimeout has passed,
// not held forever: on /v1, on the page's sign-in form (no token needed)
// and on /mcp.
func TestASlowBodyIsCutOff(t *testing.T) {
	t.Parallel() // it waits BodyTimeout
	e := start(t, devstack.Options{})
	u, err := url.Parse(e.st.Endpoints.Sidecar)
	if err != nil {
		t.Fatal(err)
	}
	bearer := "Authorization: Bearer " + e.st.Tokens["rep-ana"] + "\r\n"
	for _, tc := range []struct{ name, head, part string }{
		{"v1", "POST /v1/workflows HTTP/1.1\r\n" + bearer + "Content-Type: application/json\r\n", `{"ticket":"T-1"`},
		{"login", "POST /login HTTP/1.1\r\nContent-Type: application/x-www-form-urlencoded\r\n", "person=lead-dee"},
		{"mcp", "POST /mcp HTTP/1.1\r\n" + bearer + "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n", `{"jsonrpc":"2.0"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			conn, err := net.Dial("tcp", u.Host)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := conn.Write([]byte(tc.head + "Host: x\r\nContent-Length: 100\r\n\r\n" + tc.part)); err != nil {
				t.Fatal(err)
			}
			limit := sidecar.BodyTimeout + 15*time.Second
			if err := conn.SetReadDeadline(time.Now().Add(limit)); err != nil {
				t.Fatal(err)
			}
			res, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("no answer within %s of a body that never came: %v", limit, err)
			}
			res.Body.Close()
			if res.StatusCode < 400 {
				t.Errorf("status %d, want a refusal", res.StatusCode)
			}
		})
	}
}

// TestTwoAuthorizationHeaders: two bearer tokens in one request are
// refused, not one of them picked.
func TestTwoAuthorizationHeaders(t *testing.T) {
	e := start(t, devstack.Options{})
	h := http.Header{"Authorization": {"Bearer " + e.st.Tokens["rep-ana"], "Bearer " + e.st.Tokens["rep-ben"]}}
	e.send(t, http.MethodGet, "/v1/workflows", h, nil).want(t, http.StatusUnauthorized, "token_malformed")
}

// TestWrongMethod: a known /v1 path asked with a method it does not serve
// is 405 with Allow; an unknown path is 404; both only once authenticated.
func TestWrongMethod(t *testing.T) {
	e := start(t, devstack.Options{})
	for _, tc := range []struct {
		method, path, allow string
	}{
		{http.MethodDelete, "/v1/workflows", "GET, POST"},
		{http.MethodPut, "/v1/workflows/W1", "GET"},
		{http.MethodGet, "/v1/workflows/W1/steps/1", "PATCH"},
		{http.MethodDelete, "/v1/switches/issue_refund", "PUT"},
	} {
		r := e.call(t, tc.method, tc.path, "ops-ida", nil)
		r.want(t, http.StatusMethodNotAllowed, "method_not_allowed")
		if got := r.header.Get("Allow"); got != tc.allow {
			t.Errorf("%s %s: Allow %q, want %q", tc.method, tc.path, got, tc.allow)
		}
		e.call(t, tc.method, tc.path, "", nil).want(t, http.StatusUnauthorized, "token_missing")
	}
	e.call(t, http.MethodGet, "/v1/workflows/W1/nothing", "ops-ida", nil).want(t, http.StatusNotFound, "not_found")
}

// TestMCPTransportErrorsAreJSON: what the MCP SDK refuses in plain text is
// answered in the API's error body, with the SDK's status.
func TestMCPTransportErrorsAreJSON(t *testing.T) {
	e := start(t, devstack.Options{})
	h := func() http.Header {
		return http.Header{"Authorization": {"Bearer " + e.st.Tokens["rep-ana"]},
			"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"}}
	}
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	unknown := h()
	unknown.Set("Mcp-Session-Id", "no-such-session")
	for _, tc := range []struct {
		name   string
		method string
		header http.Header
		body   string
		status int
		code   string
	}{
		{"GET without a session", http.MethodGet, h(), "", http.StatusBadRequest, "mcp_transport_error"},
		{"an unknown session", http.MethodPost, unknown, ping, http.StatusNotFound, "mcp_session_not_found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.send(t, tc.method, "/mcp", tc.header, strings.NewReader(tc.body))
			r.want(t, tc.status, tc.code)
			if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Content-Type %q, want JSON", ct)
			}
		})
	}
}

// TestLongPathsAreClipped: an error repeats at most the start of a long id
// in the path, as of anything else the client sent.
func TestLongPathsAreClipped(t *testing.T) {
	e := start(t, devstack.Options{})
	long := strings.Repeat("W", 100_000)
	for _, path := range []string{"/v1/workflows/" + long, "/v1/approvals/" + long, "/v1/modes/" + long} {
		r := e.call(t, http.MethodGet, path, "ops-ida", nil)
		if r.status < 400 || len(r.body) > 1500 {
			t.Errorf("GET %.30s…: %d in %d bytes, want a refusal of at most 1500", path, r.status, len(r.body))
		}
	}
}

// TestAnEmptyChunkedBodyIsNoBody: a resume sent with an empty chunked body
// is a resume, as one with Content-Length: 0.
func TestAnEmptyChunkedBodyIsNoBody(t *testing.T) {
	e := start(t, devstack.Options{})
	e.open(t, "rep-ana", "W1")
	h := http.Header{"Authorization": {"Bearer " + e.st.Tokens["rep-ana"]}}
	e.send(t, http.MethodPost, "/v1/workflows/W1/resume", h, struct{ io.Reader }{strings.NewReader("")}).want(t, http.StatusOK, "")
}

// TestAmbiguousContentHeaders: two Content-Type headers, or a content
// encoding the server would not undo, are refused, not one of them picked.
func TestAmbiguousContentHeaders(t *testing.T) {
	e := start(t, devstack.Options{})
	body := `{"ticket":"T-1","id":"W1"}`
	for name, h := range map[string]http.Header{
		"two content types": {"Content-Type": {"application/json", "text/plain"}},
		"gzip":              {"Content-Type": {"application/json"}, "Content-Encoding": {"gzip"}},
	} {
		h.Set("Authorization", "Bearer "+e.st.Tokens["rep-ana"])
		if r := e.send(t, http.MethodPost, "/v1/workflows", h, strings.NewReader(body)); r.status != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", name, r.status, r.body)
		}
	}
}
