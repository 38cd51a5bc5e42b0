package ledger_test

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/executor/sim/actorcheck"
	"github.com/countersign/countersign/executor/sim/actorcheck/actorchecktest"
	"github.com/countersign/countersign/executor/sim/ledger"
	"github.com/countersign/countersign/executor/sim/simserver"
	"github.com/countersign/countersign/executor/simclock"
)

var t0 = time.Date(2026, 11, 3, 9, 0, 0, 0, time.UTC)

// env is one ledger on 127.0.0.1:0 with an issuer for its tokens.
type env struct {
	t      testing.TB
	iss    *actorchecktest.Issuer
	srv    *ledger.Server
	url    string
	dir    string
	client *http.Client
}

func start(t testing.TB, edit ...func(*ledger.Options)) *env {
	t.Helper()
	iss := actorchecktest.NewIssuer(t)
	iss.Clock = simclock.New(t0)
	e := &env{t: t, iss: iss, dir: t.TempDir()}
	o := ledger.Options{Options: simserver.Options{
		DataDir: e.dir,
		JWKSURL: iss.JWKSURL(),
		Clock:   simclock.New(t0.Add(time.Second)),
		NoSync:  true,
	}}
	for _, f := range edit {
		f(&o)
	}
	e.serve(o)
	// A fresh connection per request: a test sees exactly what the server
	// did to its connection, with no transparent retry by the transport.
	e.client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	return e
}

func (e *env) serve(o ledger.Options) {
	e.t.Helper()
	srv, err := ledger.Open(o)
	if err != nil {
		e.t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.t.Fatal(err)
	}
	go func() { _ = srv.Serve(l) }()
	e.t.Cleanup(func() { _ = srv.Close() })
	e.srv, e.url = srv, "http://"+l.Addr().String()
}

// refundToken mints a valid token for issue_refund on order and amount
// under an idempotency key (none when empty).
func (e *env) refundToken(key, order string, amount int64) string {
	var more map[string]any
	if key != "" {
		more = map[string]any{"key": key}
	}
	return e.iss.MintWith(e.t, "rep-ana", "ledger", "refund", 50000, actorcheck.RefundCall(order, amount), more)
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) entry(t testing.TB) ledger.Entry {
	t.Helper()
	var e ledger.Entry
	if err := json.Unmarshal(r.body, &e); err != nil {
		t.Fatalf("body %s: %v", r.body, err)
	}
	return e
}

func (r response) code(t testing.TB) string {
	t.Helper()
	var b struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if err := json.Unmarshal(r.body, &b); err != nil || b.Error.Code == "" {
		t.Fatalf("status %d body %q is not an error body", r.status, r.body)
	}
	return b.Error.Code
}

// do sends one request; token and key are omitted when empty.
func (e *env) do(method, path, token, key, body string) (response, error) {
	req, err := http.NewRequest(method, e.url+path, strings.NewReader(body))
	if err != nil {
		return response{}, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: b}, err
}

func (e *env) must(method, path, token, key, body string) response {
	e.t.Helper()
	r, err := e.do(method, path, token, key, body)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

func (e *env) entries() []ledger.Entry {
	e.t.Helper()
	all, err := e.srv.Entries()
	if err != nil {
		e.t.Fatal(err)
	}
	return all
}
