package mcpfront_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/cmd/devstack"
	"github.com/countersign/countersign/executor/simclock"
	"github.com/countersign/countersign/executor/strictjson"
	"github.com/countersign/countersign/sidecar/client"
)

// start brings up a dev stack on loopback over a fresh directory and closes
// it when the test ends.
func start(t *testing.T, o devstack.Options) *devstack.Stack {
	t.Helper()
	o.DataDir = t.TempDir()
	st, err := devstack.Start(context.Background(), o)
	if err != nil {
		t.Fatalf("devstack.Start: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func newManualClock() *simclock.Clock {
	return simclock.New(time.Now().UTC().Truncate(time.Second))
}

// headers adds fixed headers to every request (the bearer token, the
// workflow's).
type headers struct {
	h    http.Header
	base http.RoundTripper
}

func (w headers) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range w.h {
		r.Header[k] = v
	}
	return w.base.RoundTrip(r)
}

// bearerClient is an HTTP client presenting who's dev token and h.
func bearerClient(t *testing.T, st *devstack.Stack, who string, h http.Header) *http.Client {
	t.Helper()
	h = h.Clone()
	if h == nil {
		h = http.Header{}
	}
	if who != "" {
		tok, ok := st.Tokens[who]
		if !ok {
			t.Fatalf("no dev token for %q", who)
		}
		h.Set("Authorization", "Bearer "+tok)
	}
	return &http.Client{Transport: headers{h, http.DefaultTransport}}
}

// connect opens an MCP session on the sidecar's /mcp as who, with the
// SDK's own client over real HTTP, and closes it when the test ends.
func connect(t *testing.T, st *devstack.Stack, who string, h http.Header) *mcp.ClientSession {
	t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: st.Endpoints.Sidecar + "/mcp", HTTPClient: bearerClient(t, st, who, h), MaxRetries: -1}, nil)
	if err != nil {
		t.Fatalf("connecting to /mcp as %s: %v", who, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// workflowHeaders names a session's default workflow.
func workflowHeaders(id, ticket string) http.Header {
	return http.Header{"Countersign-Workflow": {id}, "Countersign-Ticket": {ticket}}
}

// apiClient is the typed client as who, strict, for reading what happened
// from the API itself.
func apiClient(t *testing.T, st *devstack.Stack, who string) *client.Client {
	t.Helper()
	c, err := client.New(st.Endpoints.Sidecar, st.Tokens[who], client.Strict())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// call calls a tool and fails the test on a protocol error.
func call(t *testing.T, cs *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("tools/call %s: %v", name, err)
	}
	return res
}

// structured decodes a result's structured content strictly into v: the
// content is exactly the API's shape.
func structured(t *testing.T, res *mcp.CallToolResult, v any) {
	t.Helper()
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := strictjson.Decode(b, v); err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
}

// apiErrorOf is the API error object of an error result.
func apiErrorOf(t *testing.T, res *mcp.CallToolResult) client.Error {
	t.Helper()
	if !res.IsError {
		t.Fatalf("want an error result, got %s", resultText(res))
	}
	var body struct {
		Error  client.Error `json:"error"`
		Status int          `json:"status"`
	}
	structured(t, res, &body)
	if body.Error.Code == "" || body.Error.Message == "" || body.Status == 0 {
		t.Fatalf("error result without the API's status, code and message: %s", resultText(res))
	}
	body.Error.Status = body.Status
	return body.Error
}

// resultText is a result's text content.
func resultText(res *mcp.CallToolResult) string {
	var s string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			s += tc.Text
		}
	}
	return s
}

// toolNames lists a session's tools.
func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	return names
}

// ledgerEntries counts the ledger's entries over its own HTTP API.
func ledgerEntries(t *testing.T, st *devstack.Stack) []struct {
	Order  string `json:"order"`
	Amount int64  `json:"amount"`
	By     string `json:"by"`
} {
	t.Helper()
	res, err := http.Get(st.Endpoints.Ledger + "/entries")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var b struct {
		Entries []struct {
			Order  string `json:"order"`
			Amount int64  `json:"amount"`
			By     string `json:"by"`
		} `json:"entries"`
	}
	if err := json.NewDecoder(res.Body).Decode(&b); err != nil {
		t.Fatal(err)
	}
	return b.Entries
}

// jsonRaw is arguments sent byte for byte.
func jsonRaw(s string) json.RawMessage { return json.RawMessage(s) }

func jsonDecode(t *testing.T, res *http.Response, v any) {
	t.Helper()
	if err := json.NewDecoder(res.Body).Decode(v); err != nil {
		t.Fatalf("status %d: decoding the body: %v", res.StatusCode, err)
	}
}

// sameJSON reports whether a (any JSON value) and b are the same JSON.
func sameJSON(t *testing.T, a any, b json.RawMessage) bool {
	t.Helper()
	ab, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	var x, y any
	if json.Unmarshal(ab, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return string(xb) == string(yb)
}

// sessionSpy keeps the Mcp-Session-Id the server answers.
type sessionSpy struct {
	base http.RoundTripper
	id   *string
}

func (s sessionSpy) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := s.base.RoundTrip(r)
	if err == nil && res.Header.Get("Mcp-Session-Id") != "" {
		*s.id = res.Header.Get("Mcp-Session-Id")
	}
	return res, err
}

// v1Error sends body ("" for none) to the API as who and returns the
// error it answers.
func v1Error(t *testing.T, st *devstack.Stack, who, method, path, body string) client.Error {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, st.Endpoints.Sidecar+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+st.Tokens[who])
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var b struct {
		Error *client.Error `json:"error"`
	}
	jsonDecode(t, res, &b)
	if b.Error == nil {
		t.Fatalf("%s %s: status %d without an error", method, path, res.StatusCode)
	}
	b.Error.Status = res.StatusCode
	return *b.Error
}
