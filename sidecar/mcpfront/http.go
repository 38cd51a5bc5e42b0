package mcpfront

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/executor/clock"
	"github.com/countersign/countersign/sidecar/client"
)

// The headers that name a session's default workflow.
const (
	WorkflowHeader = "Countersign-Workflow"
	TicketHeader   = "Countersign-Ticket"
)

// DefaultSessionTimeout closes a session idle for this long.
const DefaultSessionTimeout = 30 * time.Minute

// Caller is the person behind a request on /mcp, as the sidecar verified
// their bearer token.
type Caller struct {
	Subject string
	Role    string
}

// RoleRep is the role whose sessions get the catalog; every other role
// gets the approval tools.
const RoleRep = "rep"

type callerKey struct{}

// WithCaller returns ctx carrying the verified caller of a request.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// HandlerOptions configure NewHandler.
type HandlerOptions struct {
	// Dial returns a client of the sidecar presenting token. Required.
	Dial func(token string) (*client.Client, error)
	// Logger; nil discards.
	Logger *slog.Logger
	// SessionTimeout closes idle sessions; DefaultSessionTimeout when zero.
	SessionTimeout time.Duration
	// PollInterval and Clock: see Config.
	PollInterval time.Duration
	Clock        clock.Clock
}

// Handler is the streamable HTTP front. Every request must carry a Caller
// in its context (WithCaller), put there by the sidecar after verifying
// the bearer token as /v1 does; a request without one is refused 401.
type Handler struct {
	opts    HandlerOptions
	log     *slog.Logger
	http    http.Handler
	mu      sync.Mutex
	open    map[*mcp.ServerSession]struct{}
	closing bool
}

var _ http.Handler = (*Handler)(nil)

// NewHandler returns the streamable HTTP front.
func NewHandler(o HandlerOptions) *Handler {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.SessionTimeout == 0 {
		o.SessionTimeout = DefaultSessionTimeout
	}
	h := &Handler{opts: o, log: o.Logger.With("component", "mcp"), open: map[*mcp.ServerSession]struct{}{}}
	streamable := mcp.NewStreamableHTTPHandler(h.server, &mcp.StreamableHTTPOptions{SessionTimeout: o.SessionTimeout, Logger: h.log})
	// The SDK binds a session to TokenInfo.UserID: another subject on the
	// session's id is refused 403. The token was verified already; the
	// expiry was checked by the sidecar's own clock, so it is not checked
	// again here against another.
	h.http = auth.RequireBearerToken(verifiedCaller, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(streamable)
	return h
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.http.ServeHTTP(w, r) }

// Close closes every open session, so that their streams end and a server
// shutting down is not held by them.
func (h *Handler) Close() {
	h.mu.Lock()
	h.closing = true
	open := h.open
	h.open = map[*mcp.ServerSession]struct{}{}
	h.mu.Unlock()
	for ss := range open {
		ss.Close()
	}
}

// verifiedCaller gives the SDK the caller the sidecar verified.
func verifiedCaller(ctx context.Context, _ string, _ *http.Request) (*auth.TokenInfo, error) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	if !ok || c.Subject == "" {
		return nil, auth.ErrInvalidToken
	}
	return &auth.TokenInfo{UserID: c.Subject, Extra: map[string]any{"role": c.Role}}, nil
}

// server builds the server of a new session from the request that opens
// it: the caller's role chooses the tools, the headers its default
// workflow. nil (the SDK answers 400) when the catalog cannot be read.
func (h *Handler) server(r *http.Request) *mcp.Server {
	caller, _ := r.Context().Value(callerKey{}).(Caller)
	cfg := Config{
		Client:       h.requestClient,
		Lead:         caller.Role != RoleRep,
		Workflow:     r.Header.Get(WorkflowHeader),
		Ticket:       r.Header.Get(TicketHeader),
		PollInterval: h.opts.PollInterval,
		Clock:        h.opts.Clock,
	}
	if !cfg.Lead {
		c, err := h.opts.Dial(bearer(r.Header))
		if err == nil {
			cfg.Catalog, err = c.Tools(r.Context())
		}
		if err != nil {
			h.log.Error("reading the catalog for an MCP session", "sub", caller.Subject, "err", err)
			return nil
		}
	}
	s := NewServer(cfg)
	s.AddReceivingMiddleware(h.track)
	return s
}

// requestClient speaks to the sidecar with the bearer token of the MCP
// request being served, which the sidecar verified for this request.
func (h *Handler) requestClient(req *mcp.CallToolRequest) (*client.Client, error) {
	if req.Extra == nil {
		return nil, errors.New("no HTTP request behind this call")
	}
	return h.opts.Dial(bearer(req.Extra.Header))
}

// track records each session once it is initialized, until it closes.
func (h *Handler) track(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		ss, ok := req.GetSession().(*mcp.ServerSession)
		if method != "initialize" || err != nil || !ok {
			return res, err
		}
		h.mu.Lock()
		if h.closing {
			h.mu.Unlock()
			go ss.Close()
			return res, err
		}
		h.open[ss] = struct{}{}
		h.mu.Unlock()
		go func() {
			_ = ss.Wait()
			h.mu.Lock()
			delete(h.open, ss)
			h.mu.Unlock()
		}()
		return res, err
	}
}

// bearer is the token of an Authorization header.
func bearer(h http.Header) string {
	scheme, tok, _ := strings.Cut(h.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(tok)
}
