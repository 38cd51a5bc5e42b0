package mcpfront_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/cmd/devstack"
	"github.com/countersign/countersign/sidecar/client"
	"github.com/countersign/countersign/sidecar/mcpfront"
)

// A request's Origin is compared with the allowed ones as RFC 6454
// serialises origins: scheme and host in any case, the default port
// written or not, are the same origin; anything else is refused.
func TestOriginsCheck(t *testing.T) {
	o, err := mcpfront.ParseOrigins([]string{"https://Agents.Example", "http://localhost:6274", "http://[::1]:8080", "chrome-extension://abcdef"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := o.List(), []string{"chrome-extension://abcdef", "http://[::1]:8080", "http://localhost:6274", "https://agents.example"}; !slices.Equal(got, want) {
		t.Errorf("List() = %v, want %v", got, want)
	}
	for _, tc := range []struct {
		name    string
		headers []string
		admit   bool
	}{
		{"no Origin header: not a browser", nil, true},
		{"a listed origin as written", []string{"https://agents.example"}, true},
		{"scheme and host in upper case", []string{"HTTPS://AGENTS.EXAMPLE"}, true},
		{"the scheme's default port written out", []string{"https://agents.example:443"}, true},
		{"a listed port", []string{"http://localhost:6274"}, true},
		{"an IPv6 host", []string{"http://[::1]:8080"}, true},
		{"a scheme without a default port", []string{"chrome-extension://abcdef"}, true},
		{"a foreign origin", []string{"http://evil.example"}, false},
		{"a listed host under another scheme", []string{"http://agents.example"}, false},
		{"a listed host on another port", []string{"https://agents.example:8443"}, false},
		{"a listed host's subdomain", []string{"https://x.agents.example"}, false},
		{"a listed host as a suffix", []string{"https://agents.example.evil.example"}, false},
		{"another port than the listed one", []string{"http://localhost:6275"}, false},
		{"localhost without the listed port", []string{"http://localhost"}, false},
		{"null, not listed", []string{"null"}, false},
		{"an empty Origin header", []string{""}, false},
		{"a path", []string{"https://agents.example/"}, false},
		{"user info", []string{"https://me@agents.example"}, false},
		{"two origins in one header", []string{"https://agents.example http://evil.example"}, false},
		{"two Origin headers, both listed", []string{"https://agents.example", "https://agents.example"}, false},
		{"two Origin headers, one listed", []string{"http://evil.example", "https://agents.example"}, false},
		{"a percent-escaped host", []string{"https://%61gents.example"}, false},
		{"a port out of range", []string{"http://localhost:70000"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := o.Check(tc.headers)
			if tc.admit && err != nil {
				t.Errorf("Check(%q) = %v, want it admitted", tc.headers, err)
			}
			if !tc.admit && !errors.Is(err, mcpfront.ErrForbiddenOrigin) {
				t.Errorf("Check(%q) = %v, want ErrForbiddenOrigin", tc.headers, err)
			}
		})
	}

	// The zero value admits no origin; "null" only when listed.
	if err := (mcpfront.Origins{}).Check([]string{"https://agents.example"}); !errors.Is(err, mcpfront.ErrForbiddenOrigin) {
		t.Errorf("zero Origins admitted an origin: %v", err)
	}
	withNull, err := mcpfront.ParseOrigins([]string{"null"})
	if err != nil || withNull.Check([]string{"null"}) != nil || withNull.Check([]string{"NULL"}) == nil {
		t.Errorf(`"null" listed: %v; it should admit null and nothing else`, err)
	}
}

// A configuration with bad entries names each of them, and how to write
// an origin, at once.
func TestParseOriginsReportsEveryBadEntry(t *testing.T) {
	bad := []string{"*", "agents.example", "https://agents.example/", "https://agents.example/mcp", "https://agents.example?x=1",
		"https://me@agents.example", "https://bücher.example", "", "https://a.example, https://b.example", "http://localhost:0"}
	_, err := mcpfront.ParseOrigins(append([]string{"https://fine.example"}, bad...))
	if !errors.Is(err, mcpfront.ErrInvalidOrigin) {
		t.Fatalf("ParseOrigins = %v, want ErrInvalidOrigin", err)
	}
	msg := err.Error()
	if n := strings.Count(msg, "\n") + 1; n != len(bad) {
		t.Errorf("%d problems reported, want %d:\n%s", n, len(bad), msg)
	}
	for _, want := range []string{"wildcard", "scheme://host[:port]", "trailing /", "user info", "punycode", "port 0"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the report does not say %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "fine.example") {
		t.Errorf("a good entry was reported: %s", msg)
	}
}

// Whatever a client sends as Origin, Check answers without panicking and
// admits only what it was told to, or no Origin at all.
func FuzzOriginCheck(f *testing.F) {
	for _, s := range []string{"https://agents.example", "HTTPS://agents.example:443", "null", "", "http://[::1]:80",
		"https://agents.example:443/", "https://%00", "https://agents.example:", "http://a:b@c", "ws://x:65536"} {
		f.Add(s)
	}
	o, err := mcpfront.ParseOrigins([]string{"https://agents.example"})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, origin string) {
		err := o.Check([]string{origin})
		if err == nil && !strings.EqualFold(strings.TrimSuffix(strings.TrimSuffix(origin, ":443"), ":"), "https://agents.example") {
			t.Errorf("Check admitted %q", origin)
		}
		if err != nil && !errors.Is(err, mcpfront.ErrForbiddenOrigin) {
			t.Errorf("Check(%q) = %v, not ErrForbiddenOrigin", origin, err)
		}
	})
}

// Over real sockets: a request to /mcp whose Origin is not allowed is the
// API's 403 forbidden_origin, whatever its bearer (none, a bad one or a
// valid one), on every method, and opens no session; a listed origin and
// no Origin at all work with the SDK's own client.
func TestMCPOrigin(t *testing.T) {
	const listed = "https://agents.example"
	st := start(t, devstack.Options{MCPAllowedOrigins: []string{listed}})
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`
	send := func(t *testing.T, method, bearer string, origins []string) *http.Response {
		t.Helper()
		var body *strings.Reader
		if method == http.MethodPost {
			body = strings.NewReader(initialize)
		} else {
			body = strings.NewReader("")
		}
		req, err := http.NewRequest(method, st.Endpoints.Sidecar+"/mcp", body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		req.Header["Origin"] = origins
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { res.Body.Close() })
		return res
	}
	for _, tc := range []struct {
		name    string
		method  string
		bearer  string
		origins []string
	}{
		{"a foreign origin with a valid token", http.MethodPost, st.Tokens["rep-ana"], []string{"http://evil.example"}},
		{"a lead's valid token from a foreign origin", http.MethodPost, st.Tokens["lead-dee"], []string{"http://evil.example"}},
		{"a foreign origin with no token", http.MethodPost, "", []string{"http://evil.example"}},
		{"a foreign origin with a bad token", http.MethodPost, "not-a-jwt", []string{"http://evil.example"}},
		{"null with a valid token", http.MethodPost, st.Tokens["rep-ana"], []string{"null"}},
		{"the listed origin under http", http.MethodPost, st.Tokens["rep-ana"], []string{"http://agents.example"}},
		{"two Origin headers, both the listed one", http.MethodPost, st.Tokens["rep-ana"], []string{listed, listed}},
		{"the stream from a foreign origin", http.MethodGet, st.Tokens["rep-ana"], []string{"http://evil.example"}},
		{"ending a session from a foreign origin", http.MethodDelete, st.Tokens["rep-ana"], []string{"http://evil.example"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := send(t, tc.method, tc.bearer, tc.origins)
			var body struct {
				Error *client.Error `json:"error"`
			}
			jsonDecode(t, res, &body)
			if res.StatusCode != http.StatusForbidden || body.Error == nil || body.Error.Code != "forbidden_origin" {
				t.Fatalf("status %d, error %+v; want 403 forbidden_origin", res.StatusCode, body.Error)
			}
			if id := res.Header.Get("Mcp-Session-Id"); id != "" {
				t.Errorf("a session %s was opened", id)
			}
			if h := res.Header.Get("WWW-Authenticate"); h != "" {
				t.Errorf("WWW-Authenticate %q: a foreign page learns what the sidecar expects", h)
			}
			if strings.Contains(body.Error.Message, "evil.example") || strings.Contains(body.Error.Message, listed) {
				t.Errorf("the message repeats an origin: %q", body.Error.Message)
			}
		})
	}

	// The SDK's client from a foreign origin cannot connect.
	foreign := bearerClient(t, st, "rep-ana", http.Header{"Origin": {"http://evil.example"}})
	if cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "0"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: st.Endpoints.Sidecar + "/mcp", HTTPClient: foreign, MaxRetries: -1}, nil); err == nil {
		cs.Close()
		t.Fatal("the SDK's client connected from a foreign origin")
	}

	// A listed origin, spelled as a browser may, and no Origin at all: a
	// session with the catalog, and a governed call that runs.
	for name, h := range map[string]http.Header{
		"the listed origin":                {"Origin": {listed}},
		"the listed origin, default port":  {"Origin": {"HTTPS://Agents.Example:443"}},
		"no Origin (a client, no browser)": nil,
	} {
		t.Run(name, func(t *testing.T) {
			cs := connect(t, st, "rep-ana", h)
			if got := toolNames(t, cs); !slices.Contains(got, "issue_refund") {
				t.Fatalf("tools %v", got)
			}
			var s client.Step
			structured(t, call(t, cs, "lookup_order", map[string]any{"order": "O-1001"}), &s)
			if s.Status != "done" {
				t.Errorf("lookup_order: %+v", s)
			}
		})
	}

	// Past a listed origin the bearer is checked as before: no token is
	// the API's 401 with its challenge.
	res := send(t, http.MethodPost, "", []string{listed})
	if res.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(res.Header.Get("WWW-Authenticate"), "Bearer") {
		t.Errorf("a listed origin without a token: %d %q, want 401 with a Bearer challenge", res.StatusCode, res.Header.Get("WWW-Authenticate"))
	}
}
