package orders_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/countersign/countersign/executor/sim/actorcheck"
	"github.com/countersign/countersign/executor/sim/actorcheck/actorchecktest"
	"github.com/countersign/countersign/executor/sim/orders"
	"github.com/countersign/countersign/executor/sim/simserver"
	"github.com/countersign/countersign/executor/simclock"
)

var t0 = time.Date(2026, 11, 3, 9, 0, 0, 0, time.UTC)

var seed = []orders.Order{
	{ID: "O-1001", Region: "EU", Customer: "customer-1", Paid: 12000, Status: "shipped", Lines: []orders.Line{
		{ID: "L1", SKU: "PLAN", Description: "annual plan", UnitAmount: 10800, Quantity: 1},
		{ID: "L2", SKU: "ADDON", Description: "add-on", UnitAmount: 1200, Quantity: 1},
	}},
	{ID: "O-1002", Region: "EU", Customer: "customer-2", Paid: 48000, Status: "shipped", Lines: []orders.Line{
		{ID: "L1", SKU: "DESK", Description: "desk", UnitAmount: 42000, Quantity: 1},
		{ID: "L2", SKU: "INK", Description: "ink", UnitAmount: 2000, Quantity: 3},
	}},
}

type env struct {
	t           testing.TB
	allowReplay bool // the single-use check removed
	noRefKey    bool // the reference no idempotency key
	iss         *actorchecktest.Issuer
	srv         *orders.Server
	clock       *simclock.Clock // the order system's
	url         string
	dir         string
	client      *http.Client
}

func start(t testing.TB, allowReplay ...bool) *env {
	return startWith(t, func(e *env) { e.allowReplay = len(allowReplay) > 0 && allowReplay[0] })
}

// startWith starts an order system with the removals set sets on its env.
func startWith(t testing.TB, set func(*env)) *env {
	t.Helper()
	iss := actorchecktest.NewIssuer(t)
	iss.Clock = simclock.New(t0)
	e := &env{t: t, iss: iss, dir: t.TempDir(),
		client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}}
	set(e)
	e.serve(seed)
	return e
}

func (e *env) serve(seedOrders []orders.Order) {
	e.t.Helper()
	e.clock = simclock.New(t0.Add(time.Second))
	srv, err := orders.Open(orders.Options{
		Options: simserver.Options{
			DataDir: e.dir, JWKSURL: e.iss.JWKSURL(), NoSync: true,
			Clock:            e.clock,
			AllowTokenReplay: e.allowReplay,
		},
		Orders:         seedOrders,
		NoReferenceKey: e.noRefKey,
	})
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

func (e *env) token(scope, tool, order string) string {
	return e.iss.Mint(e.t, "rep-ana", "orders", scope, 50000, actorcheck.OrderCall(tool, order))
}

// reshipToken mints a reship token for order bound to reference ref.
func (e *env) reshipToken(order, ref string) string {
	return e.iss.MintWith(e.t, "rep-ana", "orders", "reship", 50000, actorcheck.OrderCall("reship_order", order), map[string]any{"ref": ref})
}

// refBody is the body of a reship under reference ref.
func refBody(ref string) string { return fmt.Sprintf(`{"reference":%q}`, ref) }

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) code(t testing.TB) string {
	t.Helper()
	var b struct {
		Error struct{ Code string } `json:"error"`
	}
	if err := json.Unmarshal(r.body, &b); err != nil || b.Error.Code == "" {
		t.Fatalf("status %d body %q is not an error body", r.status, r.body)
	}
	return b.Error.Code
}

func (e *env) do(method, path, token, body string) (response, error) {
	req, err := http.NewRequest(method, e.url+path, strings.NewReader(body))
	if err != nil {
		return response{}, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return response{resp.StatusCode, resp.Header, b}, err
}

func (e *env) must(method, path, token, body string) response {
	e.t.Helper()
	r, err := e.do(method, path, token, body)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

func (e *env) shipments(order string) []orders.Shipment {
	e.t.Helper()
	all, err := e.srv.Shipments(order)
	if err != nil {
		e.t.Fatal(err)
	}
	return all
}

func TestReshipRefusals(t *testing.T) {
	e := start(t)
	iss := e.iss
	call := actorcheck.OrderCall("reship_order", "O-1001")
	claims := func(edit func(map[string]any)) map[string]any {
		c := iss.Claims("rep-ana", "orders", "reship", 50000, call)
		c["ref"] = "R1"
		if edit != nil {
			edit(c)
		}
		return c
	}
	person := actorchecktest.SignWith(t, actorchecktest.NewKey(t, "dev-1"), map[string]any{
		"iss": "countersign-dev-idp", "sub": "rep-ana", "aud": "countersign", "exp": t0.Add(time.Hour).Unix(),
	})
	cases := []struct {
		name, path, token string
		status            int
		code              string
	}{
		{"no token", "/orders/O-1001/shipments", "", 401, actorcheck.CodeTokenMissing},
		{"expired token", "/orders/O-1001/shipments", iss.Sign(t, claims(func(c map[string]any) { c["exp"] = t0.Unix() })), 401, actorcheck.CodeTokenExpired},
		{"token for the ledger", "/orders/O-1001/shipments", iss.Sign(t, claims(func(c map[string]any) { c["aud"] = "ledger" })), 403, actorcheck.CodeWrongAudience},
		{"lookup token used to reship", "/orders/O-1001/shipments", e.token("lookup", "lookup_order", "O-1001"), 403, actorcheck.CodeWrongScope},
		{"O-1001 token used for O-1002", "/orders/O-1002/shipments", iss.Sign(t, claims(nil)), 403, actorcheck.CodeCallMismatch},
		{"alg none", "/orders/O-1001/shipments", actorchecktest.Unsigned(t, "epoch-1", claims(nil)), 401, actorcheck.CodeAlgNotAllowed},
		{"HS256 signed with the public key bytes", "/orders/O-1001/shipments", actorchecktest.SignHS256(t, iss.PublicKeyBytes(t, 1), "epoch-1", claims(nil)), 401, actorcheck.CodeAlgNotAllowed},
		{"unknown kid", "/orders/O-1001/shipments", actorchecktest.SignWith(t, actorchecktest.NewKey(t, "epoch-3"), claims(nil)), 401, actorcheck.CodeUnknownKid},
		{"foreign key with the current kid", "/orders/O-1001/shipments", actorchecktest.SignWith(t, actorchecktest.NewKey(t, "epoch-1"), claims(nil)), 401, actorcheck.CodeBadSignature},
		{"missing exp", "/orders/O-1001/shipments", iss.Sign(t, claims(func(c map[string]any) { delete(c, "exp") })), 401, actorcheck.CodeExpMissing},
		{"a person's token", "/orders/O-1001/shipments", person, 401, actorcheck.CodeNotActorToken},
		{"reship token used to look up", "/orders/O-1001", iss.Sign(t, claims(nil)), 403, actorcheck.CodeWrongScope},
		{"token for another reference", "/orders/O-1001/shipments", iss.Sign(t, claims(func(c map[string]any) { c["ref"] = "R2" })), 403, actorcheck.CodeRefMismatch},
		{"token without a reference", "/orders/O-1001/shipments", iss.Sign(t, claims(func(c map[string]any) { delete(c, "ref") })), 403, actorcheck.CodeRefMismatch},
		{"a lifetime of an hour", "/orders/O-1001/shipments", iss.Sign(t, claims(func(c map[string]any) { c["exp"] = t0.Add(time.Hour).Unix() })), 401, actorcheck.CodeTokenLifetime},
		{"issued in the future", "/orders/O-1001/shipments", iss.Sign(t, claims(func(c map[string]any) {
			c["iat"], c["exp"] = t0.Add(time.Hour).Unix(), t0.Add(time.Hour+time.Minute).Unix()
		})), 401, actorcheck.CodeTokenLifetime},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			method, body := "POST", refBody("R1")
			if !strings.HasSuffix(tc.path, "/shipments") {
				method, body = "GET", ""
			}
			r := e.must(method, tc.path, tc.token, body)
			if r.status != tc.status || r.code(t) != tc.code {
				t.Fatalf("got %d %s, want %d %s", r.status, r.body, tc.status, tc.code)
			}
		})
	}
	all, err := e.srv.AllShipments()
	if err != nil || len(all) != 0 {
		t.Fatalf("refused requests made shipments: %v %v", all, err)
	}
}

func TestEarlierEpochRefused(t *testing.T) {
	e := start(t)
	old := e.token("lookup", "lookup_order", "O-1001")
	if r := e.must("GET", "/orders/O-1001", old, ""); r.status != 200 {
		t.Fatalf("before rotation: %d %s", r.status, r.body)
	}
	e.iss.Rotate(t)
	if r := e.must("GET", "/orders/O-1001", old, ""); r.status != 401 || r.code(t) != actorcheck.CodeEpochRevoked {
		t.Fatalf("after rotation: %d %s", r.status, r.body)
	}
}

func TestLookupAndReship(t *testing.T) {
	e := start(t)
	r := e.must("GET", "/orders/O-1001", e.token("lookup", "lookup_order", "O-1001"), "")
	var o orders.Order
	want := seed[0]
	want.Currency = orders.DefaultCurrency // the seed's orders are put without one
	// nor dates: placed when seeded, by the order system's clock, and
	// shipped (its status says so) when placed
	want.PlacedAt, want.ShippedAt = t0.Add(time.Second), t0.Add(time.Second)
	if err := json.Unmarshal(r.body, &o); r.status != 200 || err != nil || !reflect.DeepEqual(o, want) {
		t.Fatalf("lookup: %d %s", r.status, r.body)
	}
	if r := e.must("GET", "/orders/O-9999", e.token("lookup", "lookup_order", "O-9999"), ""); r.status != 404 || r.code(t) != "not_found" {
		t.Fatalf("unknown order: %d %s", r.status, r.body)
	}
	// Each new reference is a new shipment.
	for i, ref := range []string{"R1", "R2"} {
		r := e.must("POST", "/orders/O-1001/shipments", e.reshipToken("O-1001", ref), refBody(ref))
		var sh orders.Shipment
		if err := json.Unmarshal(r.body, &sh); r.status != 201 || err != nil {
			t.Fatalf("reship %d: %d %s", i, r.status, r.body)
		}
		want := orders.Shipment{ID: fmt.Sprintf("S%d", i+1), Kind: orders.KindReship, Order: "O-1001", Reference: ref, By: "rep-ana", Agent: actorchecktest.Agent, At: t0.Add(time.Second)}
		if sh != want {
			t.Fatalf("shipment %+v, want %+v", sh, want)
		}
	}
	if r := e.must("POST", "/orders/O-9999/shipments", e.reshipToken("O-9999", "R3"), refBody("R3")); r.status != 404 {
		t.Fatalf("reship unknown order: %d %s", r.status, r.body)
	}
	if r := e.must("POST", "/orders/O-1001/shipments", e.reshipToken("O-1001", "R4"), `{"reference":"R4","approved_by":"lead-dee"}`); r.status != 422 || r.code(t) != "unknown_field" {
		t.Fatalf("body with a field: %d %s", r.status, r.body)
	}
	r = e.must("GET", "/orders/O-1001/shipments", "", "")
	var list struct{ Shipments []orders.Shipment }
	if err := json.Unmarshal(r.body, &list); r.status != 200 || err != nil || len(list.Shipments) != 2 {
		t.Fatalf("shipments: %d %s", r.status, r.body)
	}
	if r := e.must("GET", "/orders/O-1002/shipments", "", ""); r.status != 200 || string(r.body) != `{"shipments":[]}`+"\n" {
		t.Fatalf("no shipments: %d %q", r.status, r.body)
	}
	if r := e.must("GET", "/orders/O-9999/shipments", "", ""); r.status != 404 {
		t.Fatalf("shipments of an unknown order: %d %s", r.status, r.body)
	}
}

// An order carries placed_at and, once shipped, shipped_at: as given, or
// else placed when added by the order system's clock and shipped when
// placed. Dates that are not RFC 3339, or a shipment before the order,
// are refused.
func TestOrdersAreDated(t *testing.T) {
	e := start(t)
	added := t0.Add(time.Second)
	tests := []struct {
		name, body      string
		status          int
		placed, shipped string // as answered; "" when absent
	}{
		{"dated by the caller", `{"id":"O-2001","region":"EU","customer":"c","paid":5000,"status":"shipped","placed_at":"2026-08-01T10:00:00Z","shipped_at":"2026-08-03T16:30:00.5+02:00"}`,
			201, "2026-08-01T10:00:00Z", "2026-08-03T14:30:00.5Z"},
		{"shipped, undated", `{"id":"O-2002","region":"EU","customer":"c","paid":5000,"status":"shipped"}`,
			201, added.Format(time.RFC3339), added.Format(time.RFC3339)},
		{"not shipped, undated", `{"id":"O-2003","region":"EU","customer":"c","paid":5000,"status":"paid","placed_at":"2026-08-01T10:00:00Z"}`,
			201, "2026-08-01T10:00:00Z", ""},
		{"shipped before it was placed", `{"id":"O-2004","region":"EU","customer":"c","paid":5000,"status":"shipped","placed_at":"2026-08-02T00:00:00Z","shipped_at":"2026-08-01T00:00:00Z"}`,
			422, "", ""},
		{"a date without a zone", `{"id":"O-2005","region":"EU","customer":"c","paid":5000,"status":"paid","placed_at":"2026-08-01T10:00:00"}`,
			422, "", ""},
		{"a date as a number", `{"id":"O-2006","region":"EU","customer":"c","paid":5000,"status":"paid","placed_at":1785000000}`,
			422, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.must("POST", "/_sim/orders", "", tt.body)
			if r.status != tt.status {
				t.Fatalf("%d %s, want %d", r.status, r.body, tt.status)
			}
			if tt.status != 201 {
				return
			}
			var answer map[string]any
			if err := json.Unmarshal(r.body, &answer); err != nil {
				t.Fatal(err)
			}
			var id string
			_ = json.Unmarshal([]byte(tt.body), &struct{ ID *string }{&id})
			looked := e.must("GET", "/orders/"+id, e.token("lookup", "lookup_order", id), "")
			var stored map[string]any
			if err := json.Unmarshal(looked.body, &stored); err != nil {
				t.Fatal(err)
			}
			for _, got := range []map[string]any{answer, stored} {
				placed, _ := got["placed_at"].(string)
				shipped, _ := got["shipped_at"].(string)
				if placed != tt.placed || shipped != tt.shipped {
					t.Errorf("placed_at %q, shipped_at %q, want %q and %q", placed, shipped, tt.placed, tt.shipped)
				}
			}
		})
	}
}

func TestAdminOrdersAndExternalShipments(t *testing.T) {
	e := start(t)
	r := e.must("POST", "/_sim/orders", "", `{"id":"O-1008","region":"EU","customer":"customer-8","paid":5000,"status":"shipped"}`)
	if r.status != 201 {
		t.Fatalf("add: %d %s", r.status, r.body)
	}
	r = e.must("POST", "/_sim/orders", "", `{"id":"O-1008","region":"EU","customer":"customer-8","paid":5000,"status":"paid"}`)
	if r.status != 200 {
		t.Fatalf("replace: %d %s", r.status, r.body)
	}
	if o, err := e.srv.Order("O-1008"); err != nil || o.Status != "paid" {
		t.Fatalf("replaced order %+v %v", o, err)
	}
	for _, body := range []string{`{"id":"O-1","region":"EU","customer":"c","paid":0,"status":"paid"}`, `{"id":"X","region":"EU","customer":"c","paid":1,"status":"paid"}`, `{"id":"O-1","region":"EU","customer":"c","paid":1,"status":"paid","note":1}`} {
		if r := e.must("POST", "/_sim/orders", "", body); r.status != 422 {
			t.Errorf("%s: %d %s", body, r.status, r.body)
		}
	}
	r = e.must("POST", "/_sim/external-shipments", "", `{"order":"O-1004","by":"warehouse"}`)
	if r.status != 404 {
		t.Fatalf("external shipment of an unknown order: %d %s", r.status, r.body)
	}
	r = e.must("POST", "/_sim/external-shipments", "", `{"order":"O-1001","by":"warehouse"}`)
	var sh orders.Shipment
	if err := json.Unmarshal(r.body, &sh); r.status != 201 || err != nil || sh.Kind != orders.KindExternal || sh.By != "warehouse" || sh.Agent != "" {
		t.Fatalf("external shipment: %d %s", r.status, r.body)
	}
	if n := len(e.shipments("O-1001")); n != 1 {
		t.Fatalf("%d shipments", n)
	}
}

func TestSeededOnlyOnce(t *testing.T) {
	e := start(t)
	if _, err := e.srv.PutOrder(orders.Order{ID: "O-1001", Region: "EU", Customer: "customer-1", Paid: 12000, Status: "returned"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.srv.AddExternalShipment("O-1001", "warehouse"); err != nil {
		t.Fatal(err)
	}
	if err := e.srv.Close(); err != nil {
		t.Fatal(err)
	}
	e.serve(seed) // a reopened file keeps its own state, not the seed
	if o, err := e.srv.Order("O-1001"); err != nil || o.Status != "returned" {
		t.Fatalf("after reopen %+v %v", o, err)
	}
	if n := len(e.shipments("O-1001")); n != 1 {
		t.Fatalf("%d shipments after reopen", n)
	}
	if _, err := e.srv.Order("O-4242"); !errors.Is(err, orders.ErrNotFound) {
		t.Fatalf("unknown order: %v", err)
	}
}

func TestFaults(t *testing.T) {
	e := start(t)
	n := 0
	reship := func() (response, error) { // a new reference each time: a new shipment
		n++
		ref := fmt.Sprintf("R%d", n)
		return e.do("POST", "/orders/O-1001/shipments", e.reshipToken("O-1001", ref), refBody(ref))
	}
	// lose_response: the shipment exists, the client sees EOF.
	if err := e.srv.SetFaults(orders.Faults{LoseResponse: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := reship(); err == nil || !strings.Contains(err.Error(), "EOF") {
		t.Fatalf("lose_response: err = %v, want EOF", err)
	}
	if n := len(e.shipments("O-1001")); n != 1 {
		t.Fatalf("lose_response: %d shipments, want 1 (committed before the answer was lost)", n)
	}
	// lose_write: acknowledged, not kept.
	if err := e.srv.SetFaults(orders.Faults{LoseWrite: 1}); err != nil {
		t.Fatal(err)
	}
	if r, err := reship(); err != nil || r.status != 201 {
		t.Fatalf("lose_write: %v %+v", err, r)
	}
	if n := len(e.shipments("O-1001")); n != 1 {
		t.Fatalf("lose_write: %d shipments, want 1", n)
	}
	// delay, over HTTP.
	if r := e.must("PUT", "/_sim/faults", "", `{"delay_ms":60}`); r.status != 200 {
		t.Fatalf("PUT faults: %d %s", r.status, r.body)
	}
	begin := time.Now()
	if r, err := reship(); err != nil || r.status != 201 || time.Since(begin) < 60*time.Millisecond {
		t.Fatalf("delay: %v %+v after %v", err, r, time.Since(begin))
	}
	if r := e.must("GET", "/_sim/faults", "", ""); !strings.Contains(string(r.body), `"delay_ms":60`) {
		t.Fatalf("GET faults: %s", r.body)
	}
	// wrong_amount does not apply to an order system.
	if r := e.must("PUT", "/_sim/faults", "", `{"wrong_amount":1}`); r.status != 422 {
		t.Fatalf("wrong_amount: %d %s", r.status, r.body)
	}
	if err := e.srv.SetFaults(orders.Faults{WrongAmount: 1}); err == nil {
		t.Fatal("SetFaults accepted wrong_amount")
	}
}

func TestRoutes(t *testing.T) {
	e := start(t)
	for _, tc := range []struct {
		method, path string
		status       int
		allow        string
	}{
		{"DELETE", "/orders/O-1001", 405, "GET, HEAD"},
		{"PUT", "/orders/O-1001/shipments", 405, "POST, GET, HEAD"},
		{"GET", "/orders", 404, ""},
		{"GET", "/refunds", 404, ""},
	} {
		r := e.must(tc.method, tc.path, "", "")
		if r.status != tc.status || r.header.Get("Allow") != tc.allow {
			t.Errorf("%s %s: %d %q %s", tc.method, tc.path, r.status, r.header.Get("Allow"), r.body)
		}
		r.code(t)
	}
}

func TestOpenValidates(t *testing.T) {
	// Seeded at t0, an order shipped a day before without a placed_at
	// would be placed after it shipped.
	shippedFirst := orders.Order{ID: "O-2", Region: "EU", Customer: "c", Paid: 100, Status: "shipped", ShippedAt: t0.Add(-24 * time.Hour)}
	for _, seed := range []orders.Order{{ID: "O-1"}, shippedFirst} {
		bad := orders.Options{Options: simserver.Options{DataDir: t.TempDir(), JWKSURL: "http://127.0.0.1:1/jwks.json", Clock: simclock.New(t0)},
			Orders: []orders.Order{seed}}
		if srv, err := orders.Open(bad); err == nil || !errors.Is(err, orders.ErrInvalidOrder) {
			if srv != nil {
				_ = srv.Close()
			}
			t.Fatalf("Open with an invalid seed order %+v: %v", seed, err)
		}
	}
}

// TestReshipReference: a reship names its reference, bound in its token,
// stored with the shipment and found again by it.
func TestReshipReference(t *testing.T) {
	e := start(t)
	for _, tc := range []struct {
		name, token, body string
		status            int
		code              string
	}{
		{"empty body", e.reshipToken("O-1001", "R1"), "", 400, orders.CodeReferenceMissing},
		{"empty object", e.reshipToken("O-1001", "R1"), "{}", 400, orders.CodeReferenceMissing},
		{"body reference differs from the token's", e.reshipToken("O-1001", "R1"), refBody("R2"), 403, actorcheck.CodeRefMismatch},
		{"reference with a space", e.reshipToken("O-1001", "R 1"), refBody("R 1"), 422, "invalid_field"},
		{"reference not a string", e.reshipToken("O-1001", "R1"), `{"reference":1}`, 422, "invalid_field"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.must("POST", "/orders/O-1001/shipments", tc.token, tc.body)
			if r.status != tc.status || r.code(t) != tc.code {
				t.Fatalf("got %d %s, want %d %s", r.status, r.body, tc.status, tc.code)
			}
		})
	}
	if n := len(e.shipments("O-1001")); n != 0 {
		t.Fatalf("refused reships made %d shipments", n)
	}
	for _, ref := range []string{"cs-a", "cs-b"} {
		if r := e.must("POST", "/orders/O-1001/shipments", e.reshipToken("O-1001", ref), refBody(ref)); r.status != 201 {
			t.Fatalf("reship %s: %d %s", ref, r.status, r.body)
		}
	}
	if _, err := e.srv.AddExternalShipment("O-1001", "warehouse"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		query string
		ids   string
	}{
		{"?reference=cs-b", "S2"},
		{"?reference=cs-a", "S1"},
		{"?reference=cs-c", ""},
		{"", "S1 S2 S3"},
	} {
		r := e.must("GET", "/orders/O-1001/shipments"+tc.query, "", "")
		var list struct{ Shipments []orders.Shipment }
		if err := json.Unmarshal(r.body, &list); r.status != 200 || err != nil {
			t.Fatalf("%s: %d %s", tc.query, r.status, r.body)
		}
		var ids []string
		for _, sh := range list.Shipments {
			ids = append(ids, sh.ID)
		}
		if got := strings.Join(ids, " "); got != tc.ids {
			t.Errorf("shipments%s = %q, want %q", tc.query, got, tc.ids)
		}
	}
	for _, q := range []string{"?reference=", "?reference=a&reference=b"} {
		if r := e.must("GET", "/orders/O-1001/shipments"+q, "", ""); r.status != 422 {
			t.Errorf("%s: %d %s, want 422", q, r.status, r.body)
		}
	}
}

// TestReshipTokenReplayed: a reship token posted three times makes one
// shipment, and stays refused after the order system restarts over the
// same file; with the single-use check removed it makes three.
func TestReshipTokenReplayed(t *testing.T) {
	for _, tc := range []struct {
		name        string
		allowReplay bool
		restart     bool
		shipments   int
	}{
		{"posted three times: one shipment", false, false, 1},
		{"posted again after a restart: one shipment", false, true, 1},
		{"check removed and the reference no key: three shipments", true, false, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := startWith(t, func(e *env) { e.allowReplay, e.noRefKey = tc.allowReplay, tc.allowReplay })
			captured := e.reshipToken("O-1001", "cs-w1")
			for i := range 3 {
				if i == 1 && tc.restart {
					if err := e.srv.Close(); err != nil {
						t.Fatal(err)
					}
					e.serve(seed)
				}
				r := e.must("POST", "/orders/O-1001/shipments", captured, refBody("cs-w1"))
				switch {
				case i == 0 || tc.allowReplay:
					if r.status != 201 {
						t.Fatalf("use %d: %d %s, want 201", i+1, r.status, r.body)
					}
				case r.status != 401 || r.code(t) != actorcheck.CodeTokenReplayed:
					t.Fatalf("use %d: %d %s, want 401 token_replayed", i+1, r.status, r.body)
				}
			}
			if n := len(e.shipments("O-1001")); n != tc.shipments {
				t.Fatalf("%d shipments, want %d", n, tc.shipments)
			}
		})
	}
}

// TestCommitsCountsEachWrite: an order added is one commit of the order
// system's file, a lookup none (the bench subtracts its own order inserts
// from this count).
func TestCommitsCountsEachWrite(t *testing.T) {
	e := start(t)
	before, err := e.srv.Commits()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.srv.PutOrder(orders.Order{ID: "O-777", Region: "EU", Customer: "c", Paid: 100, Status: "shipped"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.srv.Order("O-777"); err != nil {
		t.Fatal(err)
	}
	after, err := e.srv.Commits()
	if err != nil {
		t.Fatal(err)
	}
	if after-before != 1 {
		t.Errorf("Commits went from %d to %d, want +1", before, after)
	}
}

// TestLineRefundBooking: the ledger's booking of a line-item refund is
// checked against the order's line and counted in refunded_quantity,
// which a lookup then shows; a retry under the same key counts nothing
// more, and each refusal has its own code.
func TestLineRefundBooking(t *testing.T) {
	e := start(t)
	book := func(order, body string) response {
		return e.must("POST", "/orders/"+order+"/line-refunds", "", body)
	}
	if r := book("O-1002", `{"line":"L2","quantity":2,"amount":4000,"key":"K1"}`); r.status != 200 {
		t.Fatalf("booking: %d %s", r.status, r.body)
	}
	for _, tc := range []struct {
		name, order, body string
		status            int
		code              string
	}{
		{"the same booking again is a replay", "O-1002", `{"line":"L2","quantity":2,"amount":4000,"key":"K1"}`, 200, ""},
		{"the key with another booking", "O-1002", `{"line":"L2","quantity":1,"amount":2000,"key":"K1"}`, 409, orders.CodeKeyReused},
		{"more units than are left", "O-1002", `{"line":"L2","quantity":2,"amount":4000,"key":"K2"}`, 409, orders.CodeLineNotRefundable},
		{"an amount that is not the line's price", "O-1002", `{"line":"L1","quantity":1,"amount":1200,"key":"K3"}`, 409, orders.CodeLineAmountMismatch},
		{"a line the order does not have", "O-1002", `{"line":"L9","quantity":1,"amount":1200,"key":"K4"}`, 409, orders.CodeLineNotFound},
		{"an unknown order", "O-9999", `{"line":"L1","quantity":1,"amount":1200,"key":"K5"}`, 404, "not_found"},
		{"no key", "O-1002", `{"line":"L2","quantity":1,"amount":2000}`, 422, "invalid_field"},
		{"a zero quantity", "O-1002", `{"line":"L2","quantity":0,"amount":0,"key":"K6"}`, 422, "invalid_field"},
	} {
		r := book(tc.order, tc.body)
		if r.status != tc.status || (tc.code != "" && r.code(t) != tc.code) {
			t.Errorf("%s: %d %s, want %d %s", tc.name, r.status, r.body, tc.status, tc.code)
		}
	}
	r := e.must("GET", "/orders/O-1002", e.token("lookup", "lookup_order", "O-1002"), "")
	var o orders.Order
	if err := json.Unmarshal(r.body, &o); err != nil || r.status != 200 {
		t.Fatalf("lookup: %d %s", r.status, r.body)
	}
	if got := []int64{o.Lines[0].RefundedQuantity, o.Lines[1].RefundedQuantity}; !reflect.DeepEqual(got, []int64{0, 2}) {
		t.Fatalf("refunded quantities %v, want [0 2] (one booking of 2 units, its replay counted once)", got)
	}
	if r := book("O-1002", `{"line":"L2","quantity":1,"amount":2000,"key":"K7"}`); r.status != 200 {
		t.Fatalf("the last unit: %d %s", r.status, r.body)
	}
}

// TestOrderLinesMustAddUp: an order's lines add up to what was paid, and
// a line refunds at most its quantity.
func TestOrderLinesMustAddUp(t *testing.T) {
	e := start(t)
	for _, tc := range []struct {
		name, body string
		status     int
	}{
		{"lines that add up", `{"id":"O-7","region":"EU","customer":"c","paid":3000,"status":"paid","lines":[{"id":"L1","sku":"S","description":"d","unit_amount":1000,"quantity":3,"refunded_quantity":0}]}`, 201},
		{"lines short of the amount paid", `{"id":"O-8","region":"EU","customer":"c","paid":3000,"status":"paid","lines":[{"id":"L1","sku":"S","description":"d","unit_amount":1000,"quantity":2,"refunded_quantity":0}]}`, 422},
		{"two lines with one id", `{"id":"O-8","region":"EU","customer":"c","paid":2000,"status":"paid","lines":[{"id":"L1","sku":"S","description":"d","unit_amount":1000,"quantity":1,"refunded_quantity":0},{"id":"L1","sku":"S","description":"d","unit_amount":1000,"quantity":1,"refunded_quantity":0}]}`, 422},
		{"more refunded than bought", `{"id":"O-8","region":"EU","customer":"c","paid":1000,"status":"paid","lines":[{"id":"L1","sku":"S","description":"d","unit_amount":1000,"quantity":1,"refunded_quantity":2}]}`, 422},
		{"a line with an unknown field", `{"id":"O-8","region":"EU","customer":"c","paid":1000,"status":"paid","lines":[{"id":"L1","sku":"S","description":"d","unit_amount":1000,"quantity":1,"refunded_quantity":0,"x":1}]}`, 422},
	} {
		if r := e.must("POST", "/_sim/orders", "", tc.body); r.status != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.name, r.status, r.body, tc.status)
		}
	}
}

// An order carries the currency of its amounts: USD unless added with
// another ISO 4217 code; anything else is refused.
func TestOrderCurrency(t *testing.T) {
	s := start(t)
	post := func(body string) (int, string) {
		t.Helper()
		res, err := http.Post(s.url+"/_sim/orders", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if code, body := post(`{"id":"O-8001","region":"EU","customer":"c","paid":1000,"status":"shipped"}`); code != http.StatusCreated || !strings.Contains(body, `"currency":"USD"`) {
		t.Errorf("without a currency: %d %s, want 201 with USD", code, body)
	}
	if code, body := post(`{"id":"O-8002","region":"EU","customer":"c","paid":1000,"status":"shipped","currency":"EUR"}`); code != http.StatusCreated || !strings.Contains(body, `"currency":"EUR"`) {
		t.Errorf("with EUR: %d %s", code, body)
	}
	if code, _ := post(`{"id":"O-8003","region":"EU","customer":"c","paid":1000,"status":"shipped","currency":"euro"}`); code != http.StatusUnprocessableEntity {
		t.Errorf("currency euro: %d, want 422", code)
	}
}

// TestReferenceIsTheIdempotencyKey: a reship under a reference already
// shipped, with a token of its own, ships nothing and answers the first
// shipment (200, Idempotent-Replayed), so a request that lands late after
// its caller asked again ships once; under a reference that shipped
// another order it is refused. A file written before references were keys
// is indexed when it is opened. With the key removed every request ships.
func TestReferenceIsTheIdempotencyKey(t *testing.T) {
	e := start(t)
	first := e.must("POST", "/orders/O-1001/shipments", e.reshipToken("O-1001", "cs-w1"), refBody("cs-w1"))
	if first.status != 201 {
		t.Fatalf("first reship: %d %s", first.status, first.body)
	}
	again := func(label string) {
		t.Helper()
		r := e.must("POST", "/orders/O-1001/shipments", e.reshipToken("O-1001", "cs-w1"), refBody("cs-w1"))
		if r.status != 200 || r.header.Get(orders.HeaderReplayed) != "true" || string(r.body) != string(first.body) {
			t.Fatalf("%s: %d %q %s, want 200 replayed %s", label, r.status, r.header.Get(orders.HeaderReplayed), r.body, first.body)
		}
	}
	again("the same reference again")
	if r := e.must("POST", "/orders/O-1002/shipments", e.reshipToken("O-1002", "cs-w1"), refBody("cs-w1")); r.status != 409 || r.code(t) != orders.CodeReferenceReused {
		t.Fatalf("the reference on another order: %d %s, want 409 %s", r.status, r.body, orders.CodeReferenceReused)
	}
	// lose_response applies to a replayed answer too, and keeps nothing more.
	if err := e.srv.SetFaults(orders.Faults{LoseResponse: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.do("POST", "/orders/O-1001/shipments", e.reshipToken("O-1001", "cs-w1"), refBody("cs-w1")); err == nil {
		t.Fatal("the replay's answer was not lost")
	}
	if n := len(e.shipments("O-1001")); n != 1 {
		t.Fatalf("%d shipments of O-1001, want 1", n)
	}

	// A file from before: its reference index is built at open.
	if err := e.srv.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(filepath.Join(e.dir, orders.FileName), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { return tx.DeleteBucket([]byte("references")) }); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	e.serve(seed)
	again("after reopening a file without the index")

	removed := startWith(t, func(e *env) { e.noRefKey = true })
	for range 2 {
		if r := removed.must("POST", "/orders/O-1001/shipments", removed.reshipToken("O-1001", "cs-w1"), refBody("cs-w1")); r.status != 201 {
			t.Fatalf("key removed: %d %s, want 201", r.status, r.body)
		}
	}
	if n := len(removed.shipments("O-1001")); n != 2 {
		t.Fatalf("key removed: %d shipments, want 2", n)
	}
}

// TestTokenCheckedAgainAtCommit: a reship held up by the write delay
// while its token expires is refused 401 token_expired when it comes to
// commit, and ships nothing: the receiver checks exp when the effect
// commits, not only when the request arrived. GET /_sim/faults shows the
// request held meanwhile, which is what the test waits on, and POST
// /_sim/faults/release lets it go.
func TestTokenCheckedAgainAtCommit(t *testing.T) {
	e := start(t)
	if r := e.must("PUT", "/_sim/faults", "", `{"delay_writes_ms":60000}`); r.status != 200 {
		t.Fatalf("PUT faults: %d %s", r.status, r.body)
	}
	answered := make(chan response, 1)
	go func() {
		r, err := e.do("POST", "/orders/O-1001/shipments", e.reshipToken("O-1001", "cs-held"), refBody("cs-held"))
		if err != nil {
			t.Error(err)
		}
		answered <- r
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var st struct{ Held int }
		r := e.must("GET", "/_sim/faults", "", "")
		if err := json.Unmarshal(r.body, &st); err != nil {
			t.Fatal(err)
		}
		if st.Held == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the reship was never held: %s", r.body)
		}
		time.Sleep(5 * time.Millisecond)
	}
	e.clock.Advance(time.Hour) // the token (exp t0 + 60 s) expires while it waits
	if r := e.must("POST", "/_sim/faults/release", "", ""); r.status != 200 || string(r.body) != `{"released":1}`+"\n" {
		t.Fatalf("release: %d %s", r.status, r.body)
	}
	select {
	case r := <-answered:
		if r.status != 401 || r.code(t) != actorcheck.CodeTokenExpired {
			t.Fatalf("the held reship answered %d %s, want 401 %s", r.status, r.body, actorcheck.CodeTokenExpired)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the held reship never answered")
	}
	if n := len(e.shipments("O-1001")); n != 0 {
		t.Fatalf("%d shipments, want none", n)
	}
}
