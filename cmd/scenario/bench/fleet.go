package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/countersign/countersign/cmd/devstack"
	"github.com/countersign/countersign/cmd/scenario/bench/latency"
	"github.com/countersign/countersign/cmd/stack"
	"github.com/countersign/countersign/executor/credential"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/sidecar/authn"
)

// runFleets runs every agent count with each sidecar count of o.Sidecars,
// each sidecar count on a fresh database of o.Store.
func runFleets(ctx context.Context, o Options) (_ *Report, err error) {
	dir, remove, err := tempDir(o.DataDir)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, remove()) }()
	var r *Report
	for _, k := range o.Sidecars {
		if r, err = runFleet(ctx, o, filepath.Join(dir, fmt.Sprintf("%d-sidecars", k)), k, r); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// runFleet starts k sidecars on a fresh database, runs every agent count
// on them, and stops them and drops the database. r is the report so far
// (nil: the first fleet makes it).
func runFleet(ctx context.Context, o Options, dir string, k int, r *Report) (_ *Report, err error) {
	t, cleanup, err := openFleet(ctx, o, dir, k)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := cleanup(); cerr != nil && err == nil {
			err = fmt.Errorf("bench: stop the %d sidecars: %w", k, cerr)
		}
	}()
	if r == nil {
		r = newReport(o, t)
	}
	for _, n := range o.Agents {
		row, err := runCell(ctx, o, t, n, countersign{twoRequests: o.TwoRequests})
		if err != nil {
			return nil, err
		}
		r.add(o.Progress, row)
	}
	return r, nil
}

// openFleet starts k sidecars in this process on a new database of
// o.Store, as a fleet runs: the first is a dev stack (the ledger, the
// order system and the identity provider beside it), the others join it
// with the production wiring, all minting with one key-encryption key's
// fleet keys, so the simulators, which check actor tokens against the
// first sidecar's JWKS, accept every sidecar's tokens. The sidecars reach
// the database through the bench's proxy, which adds o.StoreLatency and
// counts round trips and statements.
func openFleet(ctx context.Context, o Options, dir string, k int) (_ *target, _ func() error, err error) {
	t := newTarget()
	direct, drop, err := createDatabase(ctx, o.Store, fmt.Sprintf("countersign_bench_%s_%d", t.run, k))
	if err != nil {
		return nil, nil, err
	}
	var closers []func() error
	cleanup := func() error {
		errs := make([]error, 0, len(closers)+1)
		for i := len(closers) - 1; i >= 0; i-- {
			errs = append(errs, closers[i]())
		}
		return errors.Join(append(errs, drop())...)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, cleanup())
		}
	}()
	proxy, dbURL, err := proxyStore(direct, o.StoreLatency)
	if err != nil {
		return nil, nil, err
	}
	closers, t.proxy = append(closers, proxy.Close), proxy
	kek, err := credential.NewKeyEncryptionKey()
	if err != nil {
		return nil, nil, err
	}
	first := filepath.Join(dir, "sidecar-1")
	if err := os.MkdirAll(first, 0o700); err != nil {
		return nil, nil, err
	}
	st, err := devstack.Start(ctx, devstack.Options{DataDir: first, StoreURL: dbURL, KeyEncryptionKey: kek, Logger: o.Logger})
	if err != nil {
		return nil, nil, fmt.Errorf("bench: start the first sidecar on %s: %w", redact(dbURL), err)
	}
	closers = append(closers, st.Close)
	t.stack, t.orders, t.tokens = st, st.Endpoints.Orders, st.Tokens
	t.sidecars, t.stores, t.shared = []string{st.URL}, []*store.DB{st.Store}, true
	t.revision = st.Policy.Revision()
	for i := 2; i <= k; i++ {
		sdir := filepath.Join(dir, fmt.Sprintf("sidecar-%d", i))
		if err := os.MkdirAll(sdir, 0o700); err != nil {
			return nil, nil, err
		}
		s, err := stack.Start(ctx, stack.Options{
			DataDir: sdir, StoreURL: dbURL, KeyEncryptionKey: kek, Agent: devstack.AgentID,
			LedgerURL: st.Endpoints.Ledger, OrdersURL: st.Endpoints.Orders,
			Issuers:       []authn.Issuer{{Name: st.IdP.Name(), Keys: st.IdP.JWKS()}},
			PolicyTimeout: devstack.InProcessPolicyTimeout, Logger: o.Logger,
		})
		if err != nil {
			return nil, nil, fmt.Errorf("bench: start sidecar %d of %d: %w", i, k, err)
		}
		closers = append(closers, s.Close)
		t.sidecars, t.stores = append(t.sidecars, s.URL), append(t.stores, s.Store)
	}
	t.desc = fmt.Sprintf("in-process sidecars on PostgreSQL %s (a fresh database per sidecar count, created and dropped) "+
		"through the bench's proxy adding a %v round trip (%v each way), "+
		"one ledger, order system and identity provider, agents round-robin over the sidecars (policy deadline %v)",
		serverOf(o.Store), o.StoreLatency, o.StoreLatency/2, devstack.InProcessPolicyTimeout)
	t.files = []commitSource{
		{"sidecar stores", t.storeCommits},
		{"ledger", st.Ledger.Commits},
		{"orders", st.Orders.Commits},
	}
	return t, cleanup, nil
}

// proxyStore starts the bench's proxy in front of the server of dbURL
// with roundTrip added, and returns it and the URL of the same database
// through it. The proxied URL disables TLS unless dbURL asks for it:
// the proxy reads the statements from the bytes, which TLS would hide
// (package latency); an sslmode of verify-ca or verify-full cannot pass,
// since the client then checks the proxy's address against the server's
// certificate.
func proxyStore(dbURL string, roundTrip time.Duration) (*latency.Proxy, string, error) {
	cfg, err := pgconn.ParseConfig(dbURL)
	if err != nil {
		return nil, "", fmt.Errorf("%w: --store %s: %w", ErrOptions, redact(dbURL), err)
	}
	port := strconv.Itoa(int(cfg.Port))
	network, address := "tcp", net.JoinHostPort(cfg.Host, port)
	if filepath.IsAbs(cfg.Host) { // a socket directory, as libpq reads ?host=/dir
		network, address = "unix", filepath.Join(cfg.Host, ".s.PGSQL."+port)
	}
	p, err := latency.Start(network, address, roundTrip)
	if err != nil {
		return nil, "", fmt.Errorf("bench: start the store proxy: %w", err)
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		p.Close()
		return nil, "", fmt.Errorf("%w: --store: %w", ErrOptions, err)
	}
	q := u.Query()
	for _, k := range []string{"host", "hostaddr", "port"} {
		q.Del(k)
	}
	if q.Get("sslmode") == "" {
		q.Set("sslmode", "disable")
	}
	u.Host, u.RawQuery = p.Addr(), q.Encode()
	return p, u.String(), nil
}

// storeCommits sums the sidecars' commits: on PostgreSQL each handle
// counts only its own.
func (t *target) storeCommits() (uint64, error) {
	var sum uint64
	for _, db := range t.stores {
		n, err := db.Commits()
		if err != nil {
			return 0, err
		}
		sum += n
	}
	return sum, nil
}

// createDatabase creates the database name on the server of serverURL
// and returns its URL and its removal.
func createDatabase(ctx context.Context, serverURL, name string) (string, func() error, error) {
	u, err := url.Parse(serverURL)
	if err != nil {
		return "", nil, fmt.Errorf("%w: --store: %w", ErrOptions, err)
	}
	// The drop runs after an interrupted run too.
	ctx = context.WithoutCancel(ctx)
	exec := func(sql string) error {
		conn, err := pgx.Connect(ctx, serverURL)
		if err != nil {
			return fmt.Errorf("bench: connect to %s: %w", redact(serverURL), err)
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(ctx, sql); err != nil {
			return fmt.Errorf("bench: %s on %s (the role needs CREATEDB): %w", sql, redact(serverURL), err)
		}
		return nil
	}
	ident := pgx.Identifier{name}.Sanitize()
	if err := exec("CREATE DATABASE " + ident); err != nil {
		return "", nil, err
	}
	u.Path = "/" + name
	return u.String(), func() error { return exec("DROP DATABASE " + ident + " WITH (FORCE)") }, nil
}

// redact is raw without its password, for messages.
func redact(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	return "the --store URL"
}

// serverOf names the server of raw for the report: host and port, or the
// socket directory of a ?host= parameter.
func serverOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	host := u.Host
	if h := u.Query().Get("host"); host == "" && h != "" {
		host = h
		if p := u.Query().Get("port"); p != "" {
			host += " port " + p
		}
	}
	return strings.TrimSpace(host)
}
