package simserver

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

	"github.com/countersign/countersign/executor/groupcommit"

	"github.com/countersign/countersign/executor/clock"
	"github.com/countersign/countersign/executor/sim/actorcheck"
	"github.com/countersign/countersign/executor/sim/fault"
	"github.com/countersign/countersign/executor/sim/simhttp"
)

// Options configure a simulated system. DataDir and one of JWKSURL or Keys
// are required; everything else has a working zero value.
type Options struct {
	// DataDir holds the system's bbolt file, DataDir/<Spec.FileName>. It is
	// created (0700) if missing.
	DataDir string
	// JWKSURL is the sidecar's /.well-known/jwks.json.
	JWKSURL string
	// Keys, when set, is a fixed key set used instead of JWKSURL (tests).
	Keys jwk.Set
	// HTTPClient fetches the JWKS from JWKSURL. Nil: the verifier's own
	// client. The seeded simulation passes one whose transport reaches the
	// sidecar in process, so that a raised epoch bites at once without a
	// socket per world.
	HTTPClient *http.Client
	// JWKSMaxAge is how long a fetched JWKS is trusted before it is fetched
	// again, and so how long after a raised epoch a token of the earlier
	// epoch may still be accepted. Zero fetches it on every request (a
	// raised epoch bites at once); the sim command and the dev stack use
	// actorcheck.DefaultMaxAge (1s). A kid newer than the cached set is
	// fetched at once whatever the age.
	JWKSMaxAge time.Duration
	// Clock stamps records and is the "now" of token expiry. Nil means
	// the wall clock.
	Clock clock.Clock
	// Logger receives the system's logs. Nil discards them.
	Logger *slog.Logger
	// NoSync skips fsync on commit. For benchmarks and throwaway tests
	// only: a crash then loses acknowledged writes.
	NoSync bool
	// ShutdownTimeout bounds Close's wait for requests in flight. Zero
	// means 5 seconds.
	ShutdownTimeout time.Duration
	// AllowTokenReplay turns off the single-use check of actor tokens
	// (actorcheck.Options.AllowReplay): a captured token is then accepted
	// again until it expires. ONLY for the tests that show the check is
	// load-bearing; the sim command has no flag for it.
	AllowTokenReplay bool
}

// Spec is what one system brings to the skeleton.
type Spec struct {
	// Name prefixes every error of Open and is the "component" of the logs
	// ("ledger", "orders").
	Name string
	// Title names the system in the "<Title> serving" log line.
	Title string
	// FileName is the bbolt file under Options.DataDir.
	FileName string
	// Validate, if set, checks the system's own options. It runs after
	// DataDir is checked and before anything is created; its error is
	// returned as is.
	Validate func() error
	// Init runs in the write transaction that follows opening the file:
	// it creates the buckets (and seeds a new file).
	Init func(*bolt.Tx) error
	// NoWrongAmount makes the fault counters refuse wrong_amount.
	NoWrongAmount bool
}

// Core is what a system's own handlers work with. Open sets every field;
// none may be replaced.
type Core struct {
	Clock    clock.Clock
	Log      *slog.Logger // scoped with component=Spec.Name
	DB       *bolt.DB
	Verifier *actorcheck.Verifier
	Faults   fault.Injector
	Router   *simhttp.Router // the system adds its routes before serving

	group     *groupcommit.Group // the write transactions of the system's requests
	singleUse bool               // record jtis (Options.AllowTokenReplay unset)
	reads     actorcheck.Replays // the jtis of tokens that only read, in memory (Core.Read)
}

// Server is the face a system shows, meant to be embedded in the system's
// own Server: an http.Handler over a bbolt file, with its fault counters.
type Server struct {
	core    *Core
	title   string
	http    *simhttp.Server
	timeout time.Duration

	closeOnce sync.Once
	closeErr  error
}

var _ http.Handler = (*Server)(nil)

// Open opens (creating if needed) the bbolt file of sp in o.DataDir, runs
// sp.Init and routes /_sim/faults. It returns the Server to embed and the
// Core for the system's handlers, which add their routes to Core.Router.
func Open(o Options, sp Spec) (*Server, *Core, error) {
	if o.DataDir == "" {
		return nil, nil, fmt.Errorf("%s: Options.DataDir is required", sp.Name)
	}
	if sp.Validate != nil {
		if err := sp.Validate(); err != nil {
			return nil, nil, err
		}
	}
	// The jtis are kept in the system's own file, opened below, before any
	// request can reach the verifier.
	used := &replays{}
	v, err := actorcheck.New(actorcheck.Options{
		JWKSURL: o.JWKSURL, Keys: o.Keys, MaxAge: o.JWKSMaxAge, Clock: o.Clock, HTTPClient: o.HTTPClient,
		Replays: used, AllowReplay: o.AllowTokenReplay,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", sp.Name, err)
	}
	c := &Core{Clock: o.Clock, Log: o.Logger, Verifier: v, singleUse: !o.AllowTokenReplay, reads: actorcheck.MemoryReplays()}
	c.Faults.NoWrongAmount = sp.NoWrongAmount
	if c.Clock == nil {
		c.Clock = clock.Wall{}
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	c.Log = c.Log.With("component", sp.Name)
	s := &Server{core: c, title: sp.Title, timeout: o.ShutdownTimeout}
	if s.timeout == 0 {
		s.timeout = 5 * time.Second
	}
	if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", sp.Name, err)
	}
	path := filepath.Join(o.DataDir, sp.FileName)
	c.DB, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: 2 * time.Second, NoSync: o.NoSync})
	if err != nil {
		return nil, nil, fmt.Errorf("%s: open %s (is another process using it?): %w", sp.Name, path, err)
	}
	c.group = groupcommit.New(c.DB, 0)
	used.group = c.group
	if err := c.DB.Update(func(tx *bolt.Tx) error { return errors.Join(sp.Init(tx), createReplayBuckets(tx)) }); err != nil {
		_ = c.DB.Close()
		return nil, nil, fmt.Errorf("%s: %w", sp.Name, err)
	}
	c.Router = simhttp.NewRouter(c.Log)
	c.Faults.Routes(c.Router)
	s.http = simhttp.NewServer(s, c.Log)
	return s, c, nil
}

// ServeHTTP serves the system's API. The delay and unavailable faults
// apply here to every request outside the /_sim/ admin endpoints.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasPrefix(r.URL.Path, "/_sim/") {
		write := r.Method != http.MethodGet && r.Method != http.MethodHead
		if err := s.core.Faults.Delay(r.Context(), write); err != nil {
			return // the client left or the server is closing
		}
		if write && s.core.Faults.TakeUnavailable() {
			simhttp.WriteError(w, r, s.core.Log, simhttp.Errorf(http.StatusServiceUnavailable, simhttp.CodeUnavailable,
				"the %s is unavailable (injected fault); nothing was done: try again later", s.title))
			return
		}
	}
	s.core.Router.ServeHTTP(w, r)
}

// Serve answers requests on l until Close; it returns nil after Close.
func (s *Server) Serve(l net.Listener) error {
	s.core.Log.Info(s.title+" serving", "addr", l.Addr().String())
	return s.http.Serve(l)
}

// Close shuts the HTTP server down (waiting for requests in flight up to
// Options.ShutdownTimeout) and closes the bbolt file. It is safe to call
// more than once.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.closeErr = errors.Join(s.http.Close(s.timeout), s.core.DB.Close())
	})
	return s.closeErr
}

// Commits returns the id of the last committed write transaction of the
// system's file: see store.DB.Commits, which counts the same way.
func (s *Server) Commits() (uint64, error) {
	var id int
	err := s.core.DB.View(func(tx *bolt.Tx) error { id = tx.ID(); return nil })
	return uint64(id), err
}

// SetFaults replaces the fault counters; a system opened with
// Spec.NoWrongAmount refuses a wrong_amount counter.
func (s *Server) SetFaults(f fault.Faults) error { return s.core.Faults.Set(f) }

// Faults returns the pending fault counters.
func (s *Server) Faults() fault.Faults { return s.core.Faults.Get() }

// Held is how many requests the delay faults hold now.
func (s *Server) Held() int { return s.core.Faults.Held() }

// ReleaseHeld ends the delay of every request held now.
func (s *Server) ReleaseHeld() { s.core.Faults.Release() }
