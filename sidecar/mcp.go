package sidecar

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/countersign/countersign/sidecar/authn"
	"github.com/countersign/countersign/sidecar/client"
	"github.com/countersign/countersign/sidecar/mcpfront"
)

// inProcessURL is the base URL of the client the MCP front speaks to this
// server with; its requests never leave the process.
const inProcessURL = "http://countersign.in-process"

// newMCP is the /mcp front: its client calls this server's own handler,
// presenting the bearer of the MCP request it serves, so /mcp answers
// exactly what /v1 answers, authentication and roles included.
func (s *Server) newMCP() *mcpfront.Handler {
	hc := &http.Client{Transport: inProcess{s.echo}}
	return mcpfront.NewHandler(mcpfront.HandlerOptions{
		Dial: func(token string) (*client.Client, error) {
			return client.New(inProcessURL, token, client.WithHTTPClient(hc))
		},
		Logger: s.opts.Logger,
		Clock:  s.opts.Clock,
	})
}

// protectedResourcePath is where /mcp's OAuth 2.0 protected resource
// metadata is served (RFC 9728).
const protectedResourcePath = "/.well-known/oauth-protected-resource"

// resourceMetadata is /mcp's OAuth 2.0 protected resource metadata (RFC
// 9728 §2): what an MCP client needs to get a token for /mcp. The
// resource is /mcp's own URL, as a client reached it, which the RFC
// requires of metadata found through a 401's resource_metadata (§3.3).
type resourceMetadata struct {
	Resource               string   `json:"resource"`
	AuthorizationServers   []string `json:"authorization_servers,omitempty"`
	BearerMethodsSupported []string `json:"bearer_methods_supported"`
	ResourceName           string   `json:"resource_name"`
}

func (s *Server) protectedResource(c echo.Context) error {
	return c.JSON(http.StatusOK, resourceMetadata{
		Resource:               s.publicURL(c.Request()) + "/mcp",
		AuthorizationServers:   s.opts.AuthorizationServers,
		BearerMethodsSupported: []string{"header"}, // the API reads no token from a body or a query
		ResourceName:           "countersign",
	})
}

// publicURL is the base URL clients reach the sidecar at: Options.PublicURL,
// or the request's own scheme and Host (which net/http has checked holds
// no quote or space).
func (s *Server) publicURL(r *http.Request) string {
	if s.opts.PublicURL != "" {
		return strings.TrimSuffix(s.opts.PublicURL, "/")
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// challenge is the WWW-Authenticate header of a 401. On /mcp it names the
// protected resource metadata (RFC 9728 §5.1), as the MCP authorization
// specification asks, so that a client finds where to get a token.
func (s *Server) challenge(c echo.Context) string {
	const bearer = `Bearer realm="countersign"`
	if c.Path() != "/mcp" {
		return bearer
	}
	return bearer + `, resource_metadata="` + s.publicURL(c.Request()) + protectedResourcePath + `"`
}

// checkOrigin refuses a request to /mcp from a web page whose origin is
// not allowed (Options.MCPOrigins), before the bearer token is looked at:
// a foreign page learns nothing from a 401's code and challenge. See
// mcpfront's package doc, "Origins".
func (s *Server) checkOrigin(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := s.opts.MCPOrigins.Check(c.Request().Header.Values("Origin")); err != nil {
			return err
		}
		return next(c)
	}
}

// serveMCP hands a request that s.authenticate admitted to the MCP front,
// with the caller it verified. A transport error the MCP SDK answers in
// plain text (an unknown session, a malformed message) is answered in the
// API's error body instead, as every other non-2xx answer is.
func (s *Server) serveMCP(c echo.Context) error {
	p, _ := c.Get(principalKey).(authn.Principal)
	r := c.Request()
	r = r.WithContext(mcpfront.WithCaller(r.Context(), mcpfront.Caller{Subject: p.ID, Role: p.Role}))
	w := &plainErrors{ResponseWriter: c.Response().Writer}
	s.mcp.ServeHTTP(w, r)
	if w.status == 0 {
		return nil
	}
	c.Response().Header().Del(echo.HeaderContentLength)
	c.Response().Header().Del(echo.HeaderContentType) // the plain text's: the error is answered in JSON
	return newError(w.status, mcpErrorCode(w.status), "MCP transport: %s", strings.TrimSpace(w.text.String()))
}

// mcpErrorCode is the code of an MCP transport error of status.
func mcpErrorCode(status int) string {
	switch status {
	case http.StatusNotFound:
		return "mcp_session_not_found"
	case http.StatusForbidden:
		return "forbidden"
	case http.StatusMethodNotAllowed:
		return "method_not_allowed"
	case http.StatusUnsupportedMediaType, http.StatusNotAcceptable:
		return "unsupported_content_type"
	}
	return "mcp_transport_error"
}

// plainErrors passes a handler's answer through, except an error (400 or
// above) that is not JSON: its status and text are kept for the caller to
// answer as it answers errors.
type plainErrors struct {
	http.ResponseWriter
	status int
	text   bytes.Buffer
}

func (w *plainErrors) WriteHeader(status int) {
	if status >= 400 && !strings.HasPrefix(w.Header().Get("Content-Type"), "application/json") {
		w.status = status
		return
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *plainErrors) Write(b []byte) (int, error) {
	if w.status != 0 {
		return w.text.Write(b)
	}
	return w.ResponseWriter.Write(b)
}

// Flush keeps an event stream flowing.
func (w *plainErrors) Flush() {
	if w.status == 0 {
		_ = http.NewResponseController(w.ResponseWriter).Flush()
	}
}

func (w *plainErrors) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// inProcess is an http.RoundTripper that serves each request with h in
// the calling goroutine and answers what h wrote.
type inProcess struct{ h http.Handler }

func (t inProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	in := req.Clone(req.Context())
	in.RequestURI = req.URL.RequestURI()
	in.RemoteAddr = "in-process"
	if in.Body == nil {
		in.Body = http.NoBody
	}
	rec := &recorder{header: http.Header{}}
	t.h.ServeHTTP(rec, in)
	if req.Body != nil {
		req.Body.Close()
	}
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	return &http.Response{
		Status: strconv.Itoa(rec.status) + " " + http.StatusText(rec.status), StatusCode: rec.status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: rec.header, ContentLength: int64(rec.body.Len()),
		Body: io.NopCloser(&rec.body), Request: req,
	}, nil
}

// recorder keeps what a handler writes.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.body.Write(b)
}

// Flush lets a handler flush; the answer is whole when it returns anyway.
func (r *recorder) Flush() {}
