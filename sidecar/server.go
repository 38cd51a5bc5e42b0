package sidecar

import (
	"context"
	"errors"
	"github.com/countersign/countersign/executor/clock"
	"io"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/countersign/countersign/executor/audit"
	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/reconcile"
	"github.com/countersign/countersign/executor/release"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/sidecar/authn"
	"github.com/countersign/countersign/sidecar/leadpage"
	"github.com/countersign/countersign/sidecar/mcpfront"
)

// Authenticator verifies a person's bearer token.
type Authenticator interface {
	Verify(ctx context.Context, raw string) (authn.Principal, error)
}

// Credentials is the actor-token authority as the API exposes it.
type Credentials interface {
	JWKSJSON() ([]byte, error)
	Raise(ctx context.Context) (int, error)
}

// Options wire a Server; all but Logger are required.
type Options struct {
	Engine      *engine.Engine
	Policy      *policy.Engine
	Releases    *release.Service
	Credentials Credentials
	Auth        Authenticator
	// Gatherer serves /metrics; Registerer, when set, gets the HTTP
	// metrics (countersign_http_request_duration_seconds).
	Gatherer   prometheus.Gatherer
	Registerer prometheus.Registerer
	Logger     *slog.Logger
	// BodyLimit defaults to 1MiB (1,048,576 bytes). Echo reads "1M" as
	// the decimal megabyte, 1,000,000 bytes, so write the binary unit.
	BodyLimit string
	Store     *store.DB
	Audit     *audit.Log
	Reconcile *reconcile.Job
	// Unexplained is set to the last reconciliation's unexplained count.
	Unexplained prometheus.Gauge
	// Clock is the now of reports; nil means the wall clock.
	Clock clock.Clock
	// DevLogins are the one-click sign-ins of the lead's page in dev mode
	// (person id to token); empty in production.
	DevLogins map[string]string
	// SignIn, when set, signs leads in to the page with the
	// organisation's OpenID Connect provider; PasteTokens (dev mode only)
	// lets the page's sign-in take a pasted bearer token.
	SignIn      leadpage.SignIn
	PasteTokens bool
	// PageSessions keep the lead's page's signed-in browsers; nil, in
	// memory. Sidecars sharing a store pass leadpage.NewStoreSessions.
	PageSessions leadpage.Sessions
	// MCPOrigins are the web origins whose pages may call /mcp (serve
	// --mcp-allowed-origins); the zero value allows none. A request
	// without an Origin header is not concerned.
	MCPOrigins mcpfront.Origins
	// PublicURL is the sidecar's base URL as its clients reach it (serve
	// --public-url), such as https://countersign.example.com: /mcp's OAuth
	// protected resource metadata and its 401 challenge name URLs under it.
	// Empty: each request's own scheme and Host, right unless a proxy in
	// front changes them.
	PublicURL string
	// AuthorizationServers are the issuers of people's tokens that /mcp's
	// protected resource metadata names, where an MCP client may get one
	// (OAuth issuer identifiers, URLs). None: the field is left out.
	AuthorizationServers []string
}

// Server is the sidecar's HTTP server.
type Server struct {
	echo *echo.Echo
	opts Options
	log  *slog.Logger
	mcp  *mcpfront.Handler
	// draining ends when Serve begins to shut down, so that requests
	// waiting for a change (?wait=) answer at once instead of holding the
	// shutdown up.
	draining context.Context
	drain    context.CancelFunc
}

var _ http.Handler = (*Server)(nil)

// New builds the server and its routes. It fails only when the HTTP
// metrics cannot be registered with opts.Registerer.
func New(opts Options) (*Server, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.BodyLimit == "" {
		opts.BodyLimit = "1MiB"
	}
	if opts.Clock == nil {
		opts.Clock = clock.Wall{}
	}
	s := &Server{echo: echo.New(), opts: opts, log: opts.Logger.With("component", "sidecar")}
	s.draining, s.drain = context.WithCancel(context.Background())
	e := s.echo
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.errorHandler
	var measured *httpMetrics
	if opts.Registerer != nil {
		var err error
		if measured, err = newHTTPMetrics(opts.Registerer); err != nil {
			return nil, err
		}
		e.Use(measured.middleware)
	}
	e.Use(
		bodyDeadline,
		keepRequestID,
		middleware.RequestID(),
		s.requestLog(),
		middleware.Recover(),
		middleware.BodyLimitWithConfig(middleware.BodyLimitConfig{Limit: opts.BodyLimit, Skipper: isBundleUpload}),
	)
	s.mcp = s.newMCP()
	s.routes()
	if measured != nil {
		measured.learn(e)
	}
	return s, nil
}

// BodyTimeout bounds reading a request's body: a client that announces a
// body and sends it slowly, or never, holds a connection that long.
const BodyTimeout = 30 * time.Second

// bodyDeadline bounds reading the body of every request that has one
// (/v1, the page's forms, /mcp) to BodyTimeout: the connection's read
// deadline is set when the request arrives and cleared once its body has
// been read to the end, so it covers the body, not what the handler does
// next. A handler that never reads the body leaves it set, and the
// server's own read of the rest, after the answer, ends there too.
func bodyDeadline(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
			return next(c)
		}
		rc := http.NewResponseController(c.Response())
		if rc.SetReadDeadline(time.Now().Add(BodyTimeout)) == nil { // in process (the MCP front's client) there is no connection
			r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
		}
		return next(c)
	}
}

// deadlineBody clears the connection's read deadline at the body's end.
type deadlineBody struct {
	io.ReadCloser
	rc      *http.ResponseController
	cleared bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) && !b.cleared {
		b.cleared = true
		if cerr := b.rc.SetReadDeadline(time.Time{}); cerr != nil {
			return n, cerr
		}
	}
	return n, err
}

// keepRequestID drops a client's X-Request-Id that is not 1 to 128
// letters, digits, '.', '_' or '-', so that the id a response and the log
// repeat is either one a client can use or one the server made.
func keepRequestID(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Request().Header
		if id := h.Values(echo.HeaderXRequestID); len(id) > 1 || len(id) == 1 && !requestIDPattern.MatchString(id[0]) {
			h.Del(echo.HeaderXRequestID)
		}
		return next(c)
	}
}

var requestIDPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,128}$`)

// ServeHTTP makes the server an http.Handler (tests, embedding).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.echo.ServeHTTP(w, r) }

// Serve answers on ln until ctx ends, then shuts down gracefully, letting
// requests in flight finish for up to 10 seconds.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: s.echo, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)}
	// An MCP session's stream stays open until the session closes.
	srv.RegisterOnShutdown(s.mcp.Close)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	s.drain()
	shutCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := srv.Shutdown(shutCtx)
	if serr := <-done; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}

// requestLog logs one line per request with its id and the caller, never a
// token or a body, at the level requestLevel gives it. A 5xx's line carries
// the error the handler returned; it is the request's one ERROR line.
func (s *Server) requestLog() echo.MiddlewareFunc {
	return middleware.RequestLoggerWithConfig(middleware.RequestLoggerConfig{
		LogStatus: true, LogMethod: true, LogURIPath: true, LogLatency: true, LogRequestID: true, LogError: true,
		HandleError: true,
		LogValuesFunc: func(c echo.Context, v middleware.RequestLoggerValues) error {
			level := requestLevel(v.URIPath, v.Status)
			ctx := c.Request().Context()
			if !s.log.Enabled(ctx, level) {
				return nil
			}
			attrs := []any{"request_id", v.RequestID, "method", v.Method, "path", v.URIPath,
				"status", v.Status, "latency_ms", float64(v.Latency.Microseconds()) / 1000}
			if p, ok := c.Get(principalKey).(authn.Principal); ok {
				attrs = append(attrs, "sub", p.ID, "role", p.Role)
			}
			if v.Error != nil {
				attrs = append(attrs, "err", v.Error.Error())
			}
			s.log.Log(ctx, level, "request", attrs...)
			return nil
		},
	})
}

// requestLevel is the level of a request's log line: DEBUG for the
// probes and the scrapes, which an orchestrator and Prometheus send every
// few seconds and whose failures they report themselves (a 503 from
// /readyz is its answer while no bundle is active, not a fault); ERROR for
// any other 5xx, a fault of the sidecar or of a system behind it; INFO for
// the rest, 4xx included, which are the client's to fix.
func requestLevel(path string, status int) slog.Level {
	switch {
	case path == "/healthz" || path == "/readyz" || path == "/metrics":
		return slog.LevelDebug
	case status >= 500:
		return slog.LevelError
	default:
		return slog.LevelInfo
	}
}
