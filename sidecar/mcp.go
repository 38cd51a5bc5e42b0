package sidecar

import (
	"bytes"
	"io"
	"net/http"
	"strconv"

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

// serveMCP hands a request that s.authenticate admitted to the MCP front,
// with the caller it verified.
func (s *Server) serveMCP(c echo.Context) error {
	p, _ := c.Get(principalKey).(authn.Principal)
	r := c.Request()
	r = r.WithContext(mcpfront.WithCaller(r.Context(), mcpfront.Caller{Subject: p.ID, Role: p.Role}))
	s.mcp.ServeHTTP(c.Response(), r)
	return nil
}

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
