package latency_test

import (
	"context"
	"net/url"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/countersign/countersign/cmd/scenario/bench/latency"
	"github.com/countersign/countersign/executor/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// throughProxy starts a proxy in front of the server of dbURL and returns
// the URL that reaches the same database through it.
func throughProxy(t *testing.T, dbURL string) (*latency.Proxy, string) {
	t.Helper()
	cfg, err := pgconn.ParseConfig(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	network, address := "tcp", cfg.Host+":"+strconv.Itoa(int(cfg.Port))
	if filepath.IsAbs(cfg.Host) {
		network, address = "unix", filepath.Join(cfg.Host, ".s.PGSQL."+strconv.Itoa(int(cfg.Port)))
	}
	p := start(t, network, address, 0)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Del("host")
	q.Del("port")
	q.Set("sslmode", "disable")
	u.Host, u.RawQuery = p.Addr(), q.Encode()
	return p, u.String()
}

// Three simple queries outside a transaction are three round trips and
// three statements; a batch of three queries with arguments, sent in one
// pipeline (parse, bind, execute each, one sync), is one round trip and
// three more statements.
func TestRoundTripsAndStatementsOfKnownCalls(t *testing.T) {
	ctx := context.Background()
	p, through := throughProxy(t, pgtest.URL(t))
	cfg, err := pgx.ParseConfig(through)
	if err != nil {
		t.Fatal(err)
	}
	// Exec mode: every statement is parsed, bound and executed in the
	// same round trip, with no statement cache to describe first.
	cfg.DefaultQueryExecMode = pgx.QueryExecModeExec
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	opened := p.Counts()
	if opened.RoundTrips == 0 || opened.Statements != 0 || opened.Opaque != 0 {
		t.Fatalf("after connecting: %+v, want some round trips, no statement, nothing opaque", opened)
	}

	for i := range 3 {
		if _, err := conn.Exec(ctx, "SELECT "+strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	simple := p.Counts()
	if trips, stmts := simple.RoundTrips-opened.RoundTrips, simple.Statements-opened.Statements; trips != 3 || stmts != 3 {
		t.Errorf("three simple queries: %d round trips and %d statements, want 3 and 3", trips, stmts)
	}

	b := &pgx.Batch{}
	for i := range 3 {
		b.Queue("SELECT $1::int + 1", i)
	}
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		t.Fatal(err)
	}
	batch := p.Counts()
	if trips, stmts := batch.RoundTrips-simple.RoundTrips, batch.Statements-simple.Statements; trips != 1 || stmts != 3 {
		t.Errorf("a batch of three: %d round trips and %d statements, want 1 and 3", trips, stmts)
	}
	if batch.Opaque != 0 {
		t.Errorf("opaque connections: %d, want 0", batch.Opaque)
	}
}
