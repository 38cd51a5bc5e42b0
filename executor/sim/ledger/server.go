package ledger

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwk"
	bolt "go.etcd.io/bbolt"

	"github.com/countersign/countersign/executor/sim/actorcheck"
	"github.com/countersign/countersign/executor/sim/fault"
	"github.com/countersign/countersign/executor/sim/simhttp"
)

// Audience is the aud an actor token must carry for the ledger.
const Audience = "ledger"

// Scopes of the ledger's operations.
const (
	ScopeRefund  = "refund"
	ScopeReverse = "reverse"
)

// FileName is the bbolt file the ledger keeps under Options.DataDir.
const FileName = "ledger.db"

// Faults are the ledger's fault counters (see package fault).
type Faults = fault.Faults

// Options configure a ledger. DataDir and one of JWKSURL or Keys are
// required; everything else has a working zero value.
type Options struct {
	// DataDir holds the ledger's bbolt file, DataDir/ledger.db. It is
	// created (0700) if missing.
	DataDir string
	// JWKSURL is the sidecar's /.well-known/jwks.json.
	JWKSURL string
	// Keys, when set, is a fixed key set used instead of JWKSURL (tests).
	Keys jwk.Set
	// JWKSMaxAge is how long a fetched JWKS is trusted before it is fetched
	// again. Zero fetches it on every request (a raised epoch bites at
	// once); the sim command's default is actorcheck.DefaultMaxAge (1s).
	JWKSMaxAge time.Duration
	// Clock stamps entries and is the "now" of token expiry. Nil means
	// time.Now.
	Clock func() time.Time
	// Logger receives the ledger's logs. Nil discards them.
	Logger *slog.Logger
	// NoSync skips fsync on commit. For benchmarks and throwaway tests
	// only: a crash then loses acknowledged entries.
	NoSync bool
	// ShutdownTimeout bounds Close's wait for requests in flight. Zero
	// means 5 seconds.
	ShutdownTimeout time.Duration
}

// Server is the ledger: an http.Handler over a bbolt file.
type Server struct {
	clock    func() time.Time
	log      *slog.Logger
	db       *bolt.DB
	verifier *actorcheck.Verifier
	faults   fault.Injector
	router   *simhttp.Router
	http     *simhttp.Server
	timeout  time.Duration

	closeOnce sync.Once
	closeErr  error
}

var _ http.Handler = (*Server)(nil)

// Open opens (creating if needed) the ledger in o.DataDir. Serve it with
// Serve or mount it as an http.Handler; Close releases the file.
func Open(o Options) (*Server, error) {
	if o.DataDir == "" {
		return nil, errors.New("ledger: Options.DataDir is required")
	}
	v, err := actorcheck.New(actorcheck.Options{JWKSURL: o.JWKSURL, Keys: o.Keys, MaxAge: o.JWKSMaxAge, Clock: o.Clock})
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	s := &Server{clock: o.Clock, log: o.Logger, verifier: v, timeout: o.ShutdownTimeout}
	if s.clock == nil {
		s.clock = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.log = s.log.With("component", "ledger")
	if s.timeout == 0 {
		s.timeout = 5 * time.Second
	}
	if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	path := filepath.Join(o.DataDir, FileName)
	s.db, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: 2 * time.Second, NoSync: o.NoSync})
	if err != nil {
		return nil, fmt.Errorf("ledger: open %s (is another process using it?): %w", path, err)
	}
	if err := s.db.Update(createBuckets); err != nil {
		_ = s.db.Close()
		return nil, fmt.Errorf("ledger: %w", err)
	}
	s.router = simhttp.NewRouter(s.log)
	s.routes()
	s.http = simhttp.NewServer(s, s.log)
	return s, nil
}

// ServeHTTP serves the ledger's API. The delay fault applies here to every
// request outside the /_sim/ admin endpoints.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasPrefix(r.URL.Path, "/_sim/") {
		if err := s.faults.Delay(r.Context()); err != nil {
			return // the client left or the server is closing
		}
	}
	s.router.ServeHTTP(w, r)
}

// Serve answers requests on l until Close; it returns nil after Close.
func (s *Server) Serve(l net.Listener) error {
	s.log.Info("ledger serving", "addr", l.Addr().String())
	return s.http.Serve(l)
}

// Close shuts the HTTP server down (waiting for requests in flight up to
// Options.ShutdownTimeout) and closes the bbolt file. It is safe to call
// more than once.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.closeErr = errors.Join(s.http.Close(s.timeout), s.db.Close())
	})
	return s.closeErr
}

// SetFaults replaces the fault counters.
func (s *Server) SetFaults(f Faults) error { return s.faults.Set(f) }

// Faults returns the pending fault counters.
func (s *Server) Faults() Faults { return s.faults.Get() }
