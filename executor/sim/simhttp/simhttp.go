// Package simhttp is the HTTP layer the simulated systems of record share:
// routing with JSON 404 and 405 answers, handlers that return errors, the
// error body {"error":{"code","message"}}, bounded body reads, strict JSON
// decoding of request bodies, and a server with a clean shutdown.
//
// It exists so the ledger and the order system answer malformed requests
// identically. Like the systems it serves, it imports nothing of the sidecar
// or the engine.
package simhttp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/countersign/countersign/executor/sim/actorcheck"
)

// MaxBodyBytes bounds a request body. The largest legitimate body is an
// order record, a few hundred bytes.
const MaxBodyBytes = 64 << 10

// Stable error codes of the simulators' HTTP contract (refusals of tokens
// use actorcheck's codes).
const (
	CodeMalformedJSON    = "malformed_json"          // 400
	CodeInvalidKey       = "invalid_idempotency_key" // 400
	CodeUnknownField     = "unknown_field"           // 422
	CodeInvalidField     = "invalid_field"           // 422
	CodeBodyTooLarge     = "body_too_large"          // 413
	CodeNotFound         = "not_found"               // 404
	CodeMethodNotAllowed = "method_not_allowed"      // 405
	CodeKeysUnavailable  = "jwks_unavailable"        // 503
	CodeUnavailable      = "unavailable"             // 503
	CodeInternal         = "internal"                // 500
)

// Error is an answer other than 2xx with a stable code.
type Error struct {
	Status  int
	Code    string
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message) }

// Errorf builds an *Error.
func Errorf(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// HandlerFunc serves one request; a returned error becomes the answer.
type HandlerFunc func(w http.ResponseWriter, r *http.Request) error

// ErrAnswered is returned by a handler that has already dealt with the
// connection itself (a dropped response): nothing more is written.
var ErrAnswered = errors.New("simhttp: response already handled")

// Router is an http.ServeMux whose unknown paths answer 404 and whose known
// paths answer 405 with Allow for other methods, both as JSON errors.
type Router struct {
	mux     *http.ServeMux
	log     *slog.Logger
	mu      sync.Mutex
	methods map[string][]string // path pattern -> allowed methods
}

// NewRouter returns an empty router that logs to log.
func NewRouter(log *slog.Logger) *Router {
	rt := &Router{mux: http.NewServeMux(), log: log, methods: map[string][]string{}}
	rt.mux.Handle("/", rt.wrap(func(http.ResponseWriter, *http.Request) error {
		return Errorf(http.StatusNotFound, CodeNotFound, "no such endpoint")
	}))
	return rt
}

// Handle routes method and path (a Go 1.22 pattern path such as
// /orders/{id}) to fn.
func (rt *Router) Handle(method, path string, fn HandlerFunc) {
	rt.mux.Handle(method+" "+path, rt.wrap(fn))
	rt.mu.Lock()
	defer rt.mu.Unlock()
	first := len(rt.methods[path]) == 0
	rt.methods[path] = append(rt.methods[path], method)
	if first {
		rt.mux.Handle(path, rt.wrap(func(w http.ResponseWriter, _ *http.Request) error {
			rt.mu.Lock()
			allowed := slices.Clone(rt.methods[path])
			rt.mu.Unlock()
			if slices.Contains(allowed, http.MethodGet) {
				allowed = append(allowed, http.MethodHead)
			}
			w.Header().Set("Allow", strings.Join(allowed, ", "))
			return Errorf(http.StatusMethodNotAllowed, CodeMethodNotAllowed, "use %s", strings.Join(allowed, " or "))
		}))
	}
}

func (rt *Router) ServeHTTP(w http.ResponseWriter, r *http.Request) { rt.mux.ServeHTTP(w, r) }

func (rt *Router) wrap(fn HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := fn(w, r)
		if err == nil || errors.Is(err, ErrAnswered) {
			return
		}
		WriteError(w, r, rt.log, err)
	})
}

// WriteError answers err: an *Error or an *actorcheck.Refusal with its own
// status and code, an unavailable JWKS with 503, anything else with 500 and
// a reference that also appears in the log line.
func WriteError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	var (
		e       *Error
		refusal *actorcheck.Refusal
		answer  Error
	)
	switch {
	case errors.As(err, &e):
		answer = *e
	case errors.As(err, &refusal):
		answer = Error{Status: refusal.Status, Code: refusal.Code, Message: refusal.Message}
		if refusal.Status == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
		}
	case errors.Is(err, actorcheck.ErrKeysUnavailable):
		answer = Error{Status: http.StatusServiceUnavailable, Code: CodeKeysUnavailable,
			Message: "cannot check tokens: the sidecar's JWKS is unavailable; retry later"}
		log.Warn("refusing request: JWKS unavailable", "method", r.Method, "path", r.URL.Path, "err", err)
	default:
		ref := newRef()
		answer = Error{Status: http.StatusInternalServerError, Code: CodeInternal,
			Message: "internal error (ref " + ref + "); nothing was recorded"}
		log.Error("request failed", "ref", ref, "method", r.Method, "path", r.URL.Path, "err", err)
	}
	if answer.Status < 500 {
		log.Debug("request refused", "method", r.Method, "path", r.URL.Path, "status", answer.Status, "code", answer.Code)
	}
	WriteJSON(w, answer.Status, map[string]any{"error": map[string]string{"code": answer.Code, "message": answer.Message}})
}

func newRef() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// WriteJSON writes v as the JSON body with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"code":"internal","message":"could not encode the answer"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// ReadBody reads at most MaxBodyBytes of the request body (413 beyond).
func ReadBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return nil, Errorf(http.StatusRequestEntityTooLarge, CodeBodyTooLarge, "body over %d bytes", MaxBodyBytes)
	}
	if err != nil {
		return nil, Errorf(http.StatusBadRequest, CodeMalformedJSON, "could not read the body: %v", err)
	}
	return b, nil
}

// Server runs a handler on a listener until Close.
type Server struct {
	hs     *http.Server
	cancel context.CancelFunc
}

// NewServer wraps h. Request contexts derive from a context that Close
// cancels, so handlers waiting on them (an injected delay) end promptly.
func NewServer(h http.Handler, log *slog.Logger) *Server {
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{
		cancel: cancel,
		hs: &http.Server{
			Handler:           h,
			BaseContext:       func(net.Listener) context.Context { return ctx },
			ReadHeaderTimeout: 10 * time.Second,
			IdleTimeout:       2 * time.Minute, // longer than clients' idle timeouts, so a client never reuses a connection the server is closing
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		},
	}
}

// Serve accepts connections on l until Close; it returns nil after Close.
func (s *Server) Serve(l net.Listener) error {
	if err := s.hs.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Close stops accepting, ends waiting handlers and waits up to timeout for
// the others to finish.
func (s *Server) Close(timeout time.Duration) error {
	s.cancel()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := s.hs.Shutdown(ctx); err != nil {
		return errors.Join(err, s.hs.Close())
	}
	return nil
}
