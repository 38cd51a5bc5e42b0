package ledger_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/executor/sim/actorcheck"
	"github.com/countersign/countersign/executor/sim/actorcheck/actorchecktest"
	"github.com/countersign/countersign/executor/sim/ledger"
	"github.com/countersign/countersign/executor/sim/simserver"
	"github.com/countersign/countersign/executor/simclock"
)

const refund30 = `{"order":"O-1001","amount":3000}`

// TestRefundRefusals: each bad token is refused with its own reason and
// makes no entry.
func TestRefundRefusals(t *testing.T) {
	e := start(t)
	iss := e.iss
	call30 := actorcheck.RefundCall("O-1001", 3000)
	claims := func(edit func(map[string]any)) map[string]any {
		c := iss.Claims("rep-ana", "ledger", "refund", 50000, call30)
		c["key"] = "k-refusal"
		if edit != nil {
			edit(c)
		}
		return c
	}
	person := actorchecktest.SignWith(t, actorchecktest.NewKey(t, "dev-1"), map[string]any{
		"iss": "countersign-dev-idp", "sub": "rep-ana", "aud": "countersign", "role": "rep",
		"exp": t0.Add(time.Hour).Unix(),
	})
	cases := []struct {
		name   string
		token  string
		body   string
		status int
		code   string
	}{
		{"no token", "", refund30, 401, actorcheck.CodeTokenMissing},
		{"expired token", iss.Sign(t, claims(func(c map[string]any) { c["exp"] = t0.Unix() })), refund30, 401, actorcheck.CodeTokenExpired},
		{"token for the order system", iss.Sign(t, claims(func(c map[string]any) { c["aud"] = "orders" })), refund30, 403, actorcheck.CodeWrongAudience},
		{"wrong scope", iss.Sign(t, claims(func(c map[string]any) { c["scope"] = "reship" })), refund30, 403, actorcheck.CodeWrongScope},
		{"amount above max", iss.Sign(t, claims(func(c map[string]any) { c["max"] = 2000 })), refund30, 403, actorcheck.CodeAmountAboveMax},
		{"$30 token used for $300", iss.Sign(t, claims(nil)), `{"order":"O-1001","amount":30000}`, 403, actorcheck.CodeCallMismatch},
		{"O-1001 token used for O-1002", iss.Sign(t, claims(nil)), `{"order":"O-1002","amount":3000}`, 403, actorcheck.CodeCallMismatch},
		{"alg none", actorchecktest.Unsigned(t, "epoch-1", claims(nil)), refund30, 401, actorcheck.CodeAlgNotAllowed},
		{"HS256 signed with the public key bytes", actorchecktest.SignHS256(t, iss.PublicKeyBytes(t, 1), "epoch-1", claims(nil)), refund30, 401, actorcheck.CodeAlgNotAllowed},
		{"unknown kid", actorchecktest.SignWith(t, actorchecktest.NewKey(t, "epoch-5"), claims(nil)), refund30, 401, actorcheck.CodeUnknownKid},
		{"foreign key with the current kid", actorchecktest.SignWith(t, actorchecktest.NewKey(t, "epoch-1"), claims(nil)), refund30, 401, actorcheck.CodeBadSignature},
		{"missing exp", iss.Sign(t, claims(func(c map[string]any) { delete(c, "exp") })), refund30, 401, actorcheck.CodeExpMissing},
		{"a person's token", person, refund30, 401, actorcheck.CodeNotActorToken},
		{"a lifetime of an hour", iss.Sign(t, claims(func(c map[string]any) { c["exp"] = t0.Add(time.Hour).Unix() })), refund30, 401, actorcheck.CodeTokenLifetime},
		{"issued in the future", iss.Sign(t, claims(func(c map[string]any) {
			c["iat"], c["exp"] = t0.Add(time.Hour).Unix(), t0.Add(time.Hour+time.Minute).Unix()
		})), refund30, 401, actorcheck.CodeTokenLifetime},
		{"token minted for another key", iss.Sign(t, claims(func(c map[string]any) { c["key"] = "k-A" })), refund30, 403, actorcheck.CodeKeyMismatch},
		{"token minted without a key", iss.Sign(t, claims(func(c map[string]any) { delete(c, "key") })), refund30, 403, actorcheck.CodeKeyMismatch},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := e.must("POST", "/refunds", tc.token, "k-refusal", tc.body)
			if r.status != tc.status || r.code(t) != tc.code {
				t.Fatalf("got %d %s, want %d %s", r.status, r.body, tc.status, tc.code)
			}
			if tc.status == 401 && r.header.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
		})
	}
	if n := len(e.entries()); n != 0 {
		t.Fatalf("refused requests made %d entries", n)
	}
	// The same request with a valid token goes through.
	if r := e.must("POST", "/refunds", e.refundToken("k-ok", "O-1001", 3000), "k-ok", refund30); r.status != 201 {
		t.Fatalf("valid token: %d %s", r.status, r.body)
	}
}

// TestEarlierEpochRefused: after rotation the JWKS serves epoch-2 only, and
// a token signed under epoch-1 is refused as revoked.
func TestEarlierEpochRefused(t *testing.T) {
	e := start(t)
	if r := e.must("POST", "/refunds", e.refundToken("K1", "O-1001", 3000), "K1", refund30); r.status != 201 {
		t.Fatalf("before rotation: %d %s", r.status, r.body)
	}
	old := e.refundToken("K2", "O-1001", 3000)
	e.iss.Rotate(t)
	r := e.must("POST", "/refunds", old, "K2", refund30)
	if r.status != 401 || r.code(t) != actorcheck.CodeEpochRevoked {
		t.Fatalf("after rotation: %d %s, want 401 epoch_revoked", r.status, r.body)
	}
	if r := e.must("POST", "/refunds", e.refundToken("K2", "O-1001", 3000), "K2", refund30); r.status != 201 {
		t.Fatalf("token of the new epoch: %d %s", r.status, r.body)
	}
}

func TestRefundRecordsWhoAndReplays(t *testing.T) {
	e := start(t)
	r := e.must("POST", "/refunds", e.refundToken("W1/1", "O-1001", 3000), "W1/1", refund30)
	if r.status != 201 {
		t.Fatalf("first: %d %s", r.status, r.body)
	}
	first := r.entry(t)
	want := ledger.Entry{ID: "L1", Kind: ledger.KindRefund, Order: "O-1001", Amount: 3000, Key: "W1/1",
		By: "rep-ana", Agent: actorchecktest.Agent, At: t0.Add(time.Second)}
	if first != want {
		t.Fatalf("entry = %+v, want %+v", first, want)
	}
	// Same key, same parameters, a fresh token: the recorded entry again.
	r = e.must("POST", "/refunds", e.refundToken("W1/1", "O-1001", 3000), "W1/1", refund30)
	if r.status != 200 || r.header.Get("Idempotent-Replayed") != "true" || r.entry(t) != first {
		t.Fatalf("replay: %d %v %s", r.status, r.header, r.body)
	}
	// Same key, other parameters: a conflict, nothing recorded.
	r = e.must("POST", "/refunds", e.refundToken("W1/1", "O-1001", 4000), "W1/1", `{"order":"O-1001","amount":4000}`)
	if r.status != 409 || r.code(t) != ledger.CodeKeyReused {
		t.Fatalf("reuse: %d %s", r.status, r.body)
	}
	// Without a key nothing is recorded: a refund needs its key.
	if r := e.must("POST", "/refunds", e.refundToken("", "O-1001", 3000), "", refund30); r.status != 400 || r.code(t) != ledger.CodeKeyMissing {
		t.Fatalf("no key: %d %s, want 400 %s", r.status, r.body, ledger.CodeKeyMissing)
	}
	// Other keys are other entries.
	for _, key := range []string{"W2/1", "W3/1"} {
		if r := e.must("POST", "/refunds", e.refundToken(key, "O-1001", 3000), key, refund30); r.status != 201 {
			t.Fatalf("key %s: %d %s", key, r.status, r.body)
		}
	}
	if n := len(e.entries()); n != 3 {
		t.Fatalf("%d entries, want 3", n)
	}
	// Lookups.
	if r := e.must("GET", "/refunds?key=W1/1", "", "", ""); r.status != 200 || r.entry(t) != first {
		t.Fatalf("by key: %d %s", r.status, r.body)
	}
	if r := e.must("GET", "/refunds?key=nope", "", "", ""); r.status != 404 || r.code(t) != "not_found" {
		t.Fatalf("by unknown key: %d %s", r.status, r.body)
	}
	var list struct{ Entries []ledger.Entry }
	r = e.must("GET", "/entries", "", "", "")
	if err := json.Unmarshal(r.body, &list); err != nil || len(list.Entries) != 3 {
		t.Fatalf("entries: %s %v", r.body, err)
	}
	for i, en := range list.Entries {
		if en.ID != fmt.Sprintf("L%d", i+1) {
			t.Fatalf("entries out of id order: %s", r.body)
		}
	}
	if _, err := e.srv.ByKey("nope"); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("ByKey(nope) = %v", err)
	}
}

// TestConcurrentSameKey: the key lookup and the insert share one write
// transaction, so racing requests with one key make one entry.
func TestConcurrentSameKey(t *testing.T) {
	e := start(t)
	const n = 16
	tokens := make([]string, n)
	for i := range tokens {
		tokens[i] = e.refundToken("same-key", "O-1001", 3000)
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		created int
		ids     = map[string]int{}
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := e.do("POST", "/refunds", tokens[i], "same-key", refund30)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if r.status == 201 {
				created++
			} else if r.status != 200 {
				t.Errorf("status %d %s", r.status, r.body)
				return
			}
			var en ledger.Entry
			_ = json.Unmarshal(r.body, &en)
			ids[en.ID]++
		}()
	}
	wg.Wait()
	if created != 1 || len(ids) != 1 || len(e.entries()) != 1 {
		t.Fatalf("created %d, ids %v, entries %d; want one entry", created, ids, len(e.entries()))
	}
}

func TestReversals(t *testing.T) {
	e := start(t)
	for _, key := range []string{"K1", "K2"} {
		if r := e.must("POST", "/refunds", e.refundToken(key, "O-1001", 3000), key, refund30); r.status != 201 {
			t.Fatal(r.status, string(r.body))
		}
	}
	reverseToken := func(entry string, key ...string) string {
		more := map[string]any{}
		if len(key) > 0 {
			more["key"] = key[0]
		}
		return e.iss.MintWith(t, "lead-dee", "ledger", "reverse", 50000, actorcheck.ReversalCall(entry), more)
	}
	r := e.must("POST", "/reversals", reverseToken("L1", "rev-L1"), "rev-L1", `{"entry":"L1"}`)
	if r.status != 201 {
		t.Fatalf("reverse: %d %s", r.status, r.body)
	}
	rev := r.entry(t)
	if rev.Kind != ledger.KindReversal || rev.Reverses != "L1" || rev.Order != "O-1001" || rev.Amount != 3000 || rev.By != "lead-dee" || rev.ID != "L3" {
		t.Fatalf("reversal = %+v", rev)
	}
	cases := []struct {
		name, token, key, body string
		status                 int
		code                   string
	}{
		{"replay with the same key", reverseToken("L1", "rev-L1"), "rev-L1", `{"entry":"L1"}`, 200, ""},
		{"token for another key", reverseToken("L2", "rev-L1"), "rev-L2", `{"entry":"L2"}`, 403, actorcheck.CodeKeyMismatch},
		{"keyed token used without the key", reverseToken("L2", "rev-L2"), "", `{"entry":"L2"}`, 403, actorcheck.CodeKeyMismatch},
		{"second reversal", reverseToken("L1"), "", `{"entry":"L1"}`, 409, ledger.CodeAlreadyReversed},
		{"reversing a reversal", reverseToken("L3"), "", `{"entry":"L3"}`, 409, ledger.CodeNotReversible},
		{"unknown entry", reverseToken("L9"), "", `{"entry":"L9"}`, 404, "not_found"},
		{"token for another entry", reverseToken("L1"), "", `{"entry":"L2"}`, 403, actorcheck.CodeCallMismatch},
		{"refund scope", e.iss.Mint(t, "lead-dee", "ledger", "refund", 50000, actorcheck.ReversalCall("L2")), "", `{"entry":"L2"}`, 403, actorcheck.CodeWrongScope},
		{"bad entry id", reverseToken("X"), "", `{"entry":"X"}`, 422, "invalid_field"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := e.must("POST", "/reversals", tc.token, tc.key, tc.body)
			if r.status != tc.status {
				t.Fatalf("got %d %s, want %d", r.status, r.body, tc.status)
			}
			if tc.code != "" && r.code(t) != tc.code {
				t.Fatalf("code %s, want %s", r.code(t), tc.code)
			}
			if tc.code == "" && r.entry(t) != rev {
				t.Fatalf("replay %s, want %+v", r.body, rev)
			}
		})
	}
	if n := len(e.entries()); n != 3 {
		t.Fatalf("%d entries, want 3", n)
	}
}

func TestExternalEntries(t *testing.T) {
	e := start(t)
	r := e.must("POST", "/_sim/external-entries", "", "", `{"order":"O-1008","amount":5000,"by":"finance-clerk"}`)
	if r.status != 201 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	got := r.entry(t)
	if got.Kind != ledger.KindExternal || got.By != "finance-clerk" || got.Amount != 5000 || got.Agent != "" || got.Key != "" {
		t.Fatalf("external = %+v", got)
	}
	for _, body := range []string{`{"order":"O-1008","amount":5000}`, `{"order":"O-1008","amount":5000,"by":"x","agent":"y"}`, `{"order":"O-1008","amount":-5,"by":"x"}`} {
		if r := e.must("POST", "/_sim/external-entries", "", "", body); r.status != 422 {
			t.Errorf("%s: %d %s, want 422", body, r.status, r.body)
		}
	}
	if _, err := e.srv.AddExternal("O-1009", 100, "finance-clerk"); err != nil {
		t.Fatal(err)
	}
	if n := len(e.entries()); n != 2 {
		t.Fatalf("%d entries, want 2", n)
	}
}

func TestStrictDecoding(t *testing.T) {
	e := start(t)
	cases := []struct {
		name, key, body string
		status          int
		code            string
	}{
		{"unknown field", "", `{"order":"O-1001","amount":3000,"approved_by":"lead-dee"}`, 422, "unknown_field"},
		{"trailing data", "", refund30 + `{}`, 400, "malformed_json"},
		{"not an object", "", `[1]`, 400, "malformed_json"},
		{"empty body", "", ``, 400, "malformed_json"},
		{"broken JSON", "", `{"order":"O-1001",`, 400, "malformed_json"},
		{"fractional amount", "", `{"order":"O-1001","amount":30.5}`, 422, "invalid_field"},
		{"exponent amount", "", `{"order":"O-1001","amount":3e3}`, 422, "invalid_field"},
		{"string amount", "", `{"order":"O-1001","amount":"3000"}`, 422, "invalid_field"},
		{"zero amount", "", `{"order":"O-1001","amount":0}`, 422, "invalid_field"},
		{"negative amount", "", `{"order":"O-1001","amount":-3000}`, 422, "invalid_field"},
		{"amount beyond int64", "", `{"order":"O-1001","amount":99999999999999999999}`, 422, "invalid_field"},
		{"missing amount", "", `{"order":"O-1001"}`, 422, "invalid_field"},
		{"bad order id", "", `{"order":"1001","amount":3000}`, 422, "invalid_field"},
		{"duplicate key", "", `{"order":"O-1001","amount":3000,"amount":3000}`, 400, "malformed_json"},
		{"key with a control character", "a\tb", refund30, 400, "invalid_idempotency_key"},
		{"key too long", strings.Repeat("k", 256), refund30, 400, "invalid_idempotency_key"},
		{"body over the limit", "", `{"order":"O-1001","amount":3000,"pad":"` + strings.Repeat("x", 70<<10) + `"}`, 413, "body_too_large"},
		{"no key", "", refund30, 400, ledger.CodeKeyMissing},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := e.must("POST", "/refunds", e.refundToken(tc.key, "O-1001", 3000), tc.key, tc.body)
			if r.status != tc.status || r.code(t) != tc.code {
				t.Fatalf("got %d %s, want %d %s", r.status, r.body, tc.status, tc.code)
			}
		})
	}
	if n := len(e.entries()); n != 0 {
		t.Fatalf("%d entries from bad requests", n)
	}
}

func TestRoutes(t *testing.T) {
	e := start(t)
	cases := []struct {
		method, path string
		status       int
		code, allow  string
	}{
		{"DELETE", "/refunds", 405, "method_not_allowed", "POST, GET, HEAD"},
		{"PUT", "/entries", 405, "method_not_allowed", "GET, HEAD"},
		{"GET", "/reversals", 405, "method_not_allowed", "POST"},
		{"GET", "/nothing", 404, "not_found", ""},
		{"POST", "/refunds/L1", 404, "not_found", ""},
	}
	for _, tc := range cases {
		r := e.must(tc.method, tc.path, "", "", "")
		if r.status != tc.status || r.code(t) != tc.code || r.header.Get("Allow") != tc.allow {
			t.Errorf("%s %s: %d %q %s", tc.method, tc.path, r.status, r.header.Get("Allow"), r.body)
		}
	}
}

func TestStatePersistsAcrossReopen(t *testing.T) {
	e := start(t)
	if r := e.must("POST", "/refunds", e.refundToken("K1", "O-1001", 3000), "K1", refund30); r.status != 201 {
		t.Fatal(r.status, string(r.body))
	}
	if err := e.srv.Close(); err != nil {
		t.Fatal(err)
	}
	e.serve(ledger.Options{Options: simserver.Options{DataDir: e.dir, JWKSURL: e.iss.JWKSURL(), Clock: simclock.New(t0.Add(time.Second))}})
	r := e.must("POST", "/refunds", e.refundToken("K1", "O-1001", 3000), "K1", refund30)
	if r.status != 200 || r.entry(t).ID != "L1" {
		t.Fatalf("replay after reopen: %d %s", r.status, r.body)
	}
	r = e.must("POST", "/refunds", e.refundToken("K2", "O-1001", 3000), "K2", refund30)
	if r.status != 201 || r.entry(t).ID != "L2" {
		t.Fatalf("new entry after reopen: %d %s", r.status, r.body)
	}
}

func TestOpenValidates(t *testing.T) {
	for name, o := range map[string]ledger.Options{
		"no data dir": {Options: simserver.Options{JWKSURL: "http://127.0.0.1:1/jwks.json"}},
		"no keys":     {Options: simserver.Options{DataDir: t.TempDir()}},
	} {
		if srv, err := ledger.Open(o); err == nil {
			_ = srv.Close()
			t.Errorf("%s: Open accepted %+v", name, o)
		}
	}
}

// TestCapturedTokenReplayed: a token captured in flight and posted again,
// under a new key, with no key or with its own key, is refused as a
// replay and makes no entry; so it is after the ledger restarts over the
// same file. With the check removed, the key binding still keeps it to
// the one entry.
func TestCapturedTokenReplayed(t *testing.T) {
	for _, tc := range []struct {
		name         string
		allowReplay  bool
		restart      bool
		key          string
		status       int
		code         string
		entriesAfter int
	}{
		{"under a new key", false, false, "K-new", 401, actorcheck.CodeTokenReplayed, 1},
		{"with no key", false, false, "", 401, actorcheck.CodeTokenReplayed, 1},
		{"under its own key", false, false, "K1", 401, actorcheck.CodeTokenReplayed, 1},
		{"after a restart, under a new key", false, true, "K-new", 401, actorcheck.CodeTokenReplayed, 1},
		{"after a restart, under its own key", false, true, "K1", 401, actorcheck.CodeTokenReplayed, 1},
		{"check removed: under a new key the key binding refuses", true, false, "K-new", 403, actorcheck.CodeKeyMismatch, 1},
		{"check removed: under its own key the ledger replays", true, false, "K1", 200, "", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := start(t, func(o *ledger.Options) { o.AllowTokenReplay = tc.allowReplay })
			captured := e.refundToken("K1", "O-1001", 3000)
			if r := e.must("POST", "/refunds", captured, "K1", refund30); r.status != 201 {
				t.Fatalf("first use: %d %s", r.status, r.body)
			}
			if tc.restart {
				if err := e.srv.Close(); err != nil {
					t.Fatal(err)
				}
				e.serve(ledger.Options{Options: simserver.Options{DataDir: e.dir, JWKSURL: e.iss.JWKSURL(), Clock: simclock.New(t0.Add(time.Second))}})
			}
			r := e.must("POST", "/refunds", captured, tc.key, refund30)
			if r.status != tc.status || (tc.code != "" && r.code(t) != tc.code) {
				t.Fatalf("replay: %d %s, want %d %s", r.status, r.body, tc.status, tc.code)
			}
			if n := len(e.entries()); n != tc.entriesAfter {
				t.Fatalf("%d entries, want %d", n, tc.entriesAfter)
			}
			// A retry that mints a fresh token for the same key still gets
			// the recorded entry back.
			if r := e.must("POST", "/refunds", e.refundToken("K1", "O-1001", 3000), "K1", refund30); r.status != 200 || r.entry(t).ID != "L1" {
				t.Fatalf("retry with a fresh token: %d %s", r.status, r.body)
			}
		})
	}
}

// TestLineRefundWithoutOrderSystem: a ledger started without the order
// system cannot check a line, so it refuses line-item refunds (503) and
// makes no entry; a refund by amount still works.
func TestLineRefundWithoutOrderSystem(t *testing.T) {
	e := start(t)
	call := actorcheck.LineRefundCall("O-1001", "L2", 1, 1200)
	tok := e.iss.MintWith(t, "rep-ana", "ledger", "refund", 50000, call, map[string]any{"key": "K1", "line": "L2", "quantity": 1})
	r := e.must("POST", "/refunds", tok, "K1", `{"order":"O-1001","amount":1200,"line":"L2","quantity":1}`)
	if r.status != 503 || r.code(t) != ledger.CodeLineCheckUnavailable {
		t.Fatalf("line refund without the order system: %d %s", r.status, r.body)
	}
	if r := e.must("POST", "/refunds", e.refundToken("K2", "O-1001", 1200), "K2", `{"order":"O-1001","amount":1200}`); r.status != 201 {
		t.Fatalf("refund by amount: %d %s", r.status, r.body)
	}
	if all, err := e.srv.Entries(); err != nil || len(all) != 1 {
		t.Fatalf("entries %v %v, want the refund by amount only", all, err)
	}
}

// inProcess is a transport that sends every request to one handler's
// server, whatever its host: a JWKS reached without resolving a name.
type inProcess struct{ target string }

func (p inProcess) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.URL.Scheme, r.URL.Host, r.Host = "http", p.target, ""
	return http.DefaultTransport.RoundTrip(r)
}

// TestKeysFetchedWithTheGivenClient: with simserver.Options.HTTPClient,
// the JWKS is fetched through it: a host no resolver knows still gives the
// ledger the issuer's keys, and a valid token books its refund.
func TestKeysFetchedWithTheGivenClient(t *testing.T) {
	e := start(t, func(o *ledger.Options) {
		issuer, err := url.Parse(o.JWKSURL)
		if err != nil {
			t.Fatal(err)
		}
		o.JWKSURL = "http://keys.invalid" + issuer.Path
		o.HTTPClient = &http.Client{Transport: inProcess{target: issuer.Host}}
	})
	r := e.must("POST", "/refunds", e.refundToken("W1/1", "O-1001", 3000), "W1/1", refund30)
	if r.status != 201 {
		t.Fatalf("refund with a token whose keys come through Options.HTTPClient: %d %s", r.status, r.body)
	}
}
