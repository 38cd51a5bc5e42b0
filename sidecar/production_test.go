package sidecar_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/countersign/countersign/bundles"
	"github.com/countersign/countersign/cmd/devstack"
	"github.com/countersign/countersign/cmd/stack"
	"github.com/countersign/countersign/executor/fixture"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/sim/idp"
	"github.com/countersign/countersign/executor/sim/ledger"
	"github.com/countersign/countersign/executor/sim/orders"
	"github.com/countersign/countersign/executor/sim/simserver"
	"github.com/countersign/countersign/sidecar/authn"
)

// Without dev mode the sidecar starts no simulator and no bundle: it talks
// to the systems it is given, trusts the issuer's JWKS file, and answers 503
// until an operator activates a bundle through the gate.
func TestProductionModeStartsNotReady(t *testing.T) {
	dir := t.TempDir()
	// The systems of record must know the sidecar's JWKS URL before it runs.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	jwks := "http://" + addr + "/.well-known/jwks.json"

	lg, err := ledger.Open(ledger.Options{Options: simserver.Options{DataDir: filepath.Join(dir, "ext-ledger"), JWKSURL: jwks}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lg.Close() })
	os_, err := orders.Open(orders.Options{Options: simserver.Options{DataDir: filepath.Join(dir, "ext-orders"), JWKSURL: jwks}, Orders: devstack.FixtureOrders(time.Now())})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os_.Close() })
	ledgerURL, ordersURL := serveHandler(t, lg), serveHandler(t, os_)

	issuer, err := idp.Open(idp.Options{Dir: filepath.Join(dir, "ext-idp")})
	if err != nil {
		t.Fatal(err)
	}
	jwksFile := filepath.Join(dir, "issuer-jwks.json")
	if err := os.WriteFile(jwksFile, issuer.JWKSJSON(), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens, err := issuer.Tokens(fixture.People(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}

	// The production wiring alone (cmd/stack links no simulator: its own
	// test holds that), dressed as the env the helpers drive.
	prod, err := stack.Start(context.Background(), stack.Options{
		DataDir: filepath.Join(dir, "sidecar"), Listen: addr, Agent: devstack.AgentID,
		LedgerURL: ledgerURL, OrdersURL: ordersURL,
		Issuers:       []authn.Issuer{{Name: issuer.Name(), JWKSFile: jwksFile}},
		PolicyTimeout: devstack.InProcessPolicyTimeout, // not about the deadline: a loaded machine is slow
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prod.Close() })
	e := &env{st: &devstack.Stack{Stack: prod, Endpoints: devstack.Endpoints{Sidecar: prod.URL, Ledger: ledgerURL, Orders: ordersURL}, Tokens: tokens},
		dir: filepath.Join(dir, "sidecar"), client: &http.Client{Timeout: 30 * time.Second}}

	if r := e.call(t, "GET", "/readyz", "", nil); r.status != http.StatusServiceUnavailable || r.errorOf(t).Code != "not_ready" {
		t.Fatalf("readyz before a bundle: %d %s", r.status, r.body)
	}
	e.open(t, "rep-ana", "W1")
	if r, _ := e.propose(t, "rep-ana", "W1", "issue_refund", map[string]any{"order": "O-1001", "amount": 3000}); r.status != http.StatusServiceUnavailable {
		t.Fatalf("a step with no bundle: %d %s", r.status, r.body)
	}

	fsys, err := bundles.Open("p1")
	if err != nil {
		t.Fatal(err)
	}
	archive, err := policy.Build(fsys)
	if err != nil {
		t.Fatal(err)
	}
	r := e.send(t, "POST", "/v1/bundles", http.Header{"Authorization": {"Bearer " + tokens["ops-ida"]}, "Content-Type": {"application/gzip"}}, bytes.NewReader(archive))
	if r.status != http.StatusCreated {
		t.Fatalf("activate p1: %d %s", r.status, r.body)
	}
	r = e.call(t, "GET", "/readyz", "", nil)
	if r.status != http.StatusOK {
		t.Fatalf("readyz after p1: %d %s", r.status, r.body)
	}
	var ready struct {
		Version struct {
			GoVersion  string `json:"go_version"`
			OPAVersion string `json:"opa_version"`
		} `json:"version"`
	}
	if err := json.Unmarshal(r.body, &ready); err != nil || ready.Version.GoVersion == "" || ready.Version.OPAVersion == "unknown" || ready.Version.OPAVersion == "" {
		t.Fatalf("readyz should say which build answers (err %v): %s", err, r.body)
	}
	// The step that found no bundle stayed pending; resuming runs it.
	w := e.resume(t, "rep-ana", "W1")
	if w.Steps[0].Status != "done" {
		t.Fatalf("step after resume: %+v", w.Steps[0])
	}
	entries, err := lg.Entries()
	if err != nil || len(entries) != 1 || entries[0].Amount != 3000 {
		t.Fatalf("external ledger entries %+v %v", entries, err)
	}
}

func serveHandler(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	return "http://" + ln.Addr().String()
}
