package sidecar_test

import (
	"bytes"
	"cmp"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/cmd/devstack"
	"github.com/countersign/countersign/executor/sim/idp"
	"github.com/countersign/countersign/executor/simclock"
)

// forged returns tokens an attacker or a broken client could present, all
// for rep-ana, each of which the sidecar must refuse.
func forged(t *testing.T, e *env) map[string]string {
	t.Helper()
	b64 := base64.RawURLEncoding
	valid := e.st.Tokens["rep-ana"]
	parts := strings.Split(valid, ".")
	if len(parts) != 3 {
		t.Fatalf("dev token is not a compact JWS")
	}
	var claims map[string]any
	raw, _ := b64.DecodeString(parts[1])
	if err := json.Unmarshal(raw, &claims); err != nil {
		t.Fatal(err)
	}
	claims["role"] = "operator"
	elevated, _ := json.Marshal(claims)

	// HS256 keyed with the issuer's public JWKS: the classic key confusion.
	hsHead := b64.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT","kid":"idp-1"}`))
	mac := hmac.New(sha256.New, e.st.IdP.JWKSJSON())
	mac.Write([]byte(hsHead + "." + parts[1]))

	// A well-formed EdDSA token under a kid nobody published.
	_, priv, _ := ed25519.GenerateKey(nil)
	kidHead := b64.EncodeToString([]byte(`{"alg":"EdDSA","typ":"JWT","kid":"rogue-1"}`))
	rogue := kidHead + "." + parts[1] + "." + b64.EncodeToString(ed25519.Sign(priv, []byte(kidHead+"."+parts[1])))

	sign := func(o idp.Options) string {
		iss, err := idp.Open(o)
		if err != nil {
			t.Fatal(err)
		}
		tok, err := iss.Sign(person(t, "rep-ana"), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	return map[string]string{
		"alg none":         b64.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + parts[1] + ".",
		"unknown kid":      rogue,
		"hs256":            hsHead + "." + parts[1] + "." + b64.EncodeToString(mac.Sum(nil)),
		"payload tampered": parts[0] + "." + b64.EncodeToString(elevated) + "." + parts[2],
		// The trusted key, a minute's lifetime, two hours ago.
		"expired": sign(idp.Options{Dir: e.dir, Clock: simclock.New(time.Now().Add(-2 * time.Hour))}),
		// Another identity provider's key under the same kid.
		"unknown key": sign(idp.Options{Dir: t.TempDir()}),
		// The trusted key, but an issuer the sidecar does not trust.
		"untrusted issuer": sign(idp.Options{Dir: e.dir, Issuer: "evil-idp"}),
	}
}

func TestAuthentication(t *testing.T) {
	logs := &logBuffer{}
	e := start(t, devstack.Options{Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	tok := forged(t, e)
	cases := []struct {
		name, authorization, code string
	}{
		{"missing", "", "token_missing"},
		{"basic scheme", "Basic cmVwLWFuYTpwdw==", "token_missing"},
		{"bearer without token", "Bearer ", "token_missing"},
		{"garbage", "Bearer garbage", "token_malformed"},
		{"two tokens", "Bearer a.b.c d.e.f", "token_malformed"},
		{"alg none", "Bearer " + tok["alg none"], "alg_not_allowed"},
		{"hs256 with the public key", "Bearer " + tok["hs256"], "alg_not_allowed"},
		{"payload tampered", "Bearer " + tok["payload tampered"], "bad_signature"},
		{"expired", "Bearer " + tok["expired"], "token_expired"},
		{"unknown key", "Bearer " + tok["unknown key"], "bad_signature"},
		{"unknown kid", "Bearer " + tok["unknown kid"], "unknown_kid"},
		{"untrusted issuer", "Bearer " + tok["untrusted issuer"], "wrong_issuer"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := http.Header{"Content-Type": {"application/json"}}
			if c.authorization != "" {
				h.Set("Authorization", c.authorization)
			}
			for _, path := range []string{"/v1/tools", "/v1/switches", "/v1/no-such-route"} {
				e.send(t, http.MethodGet, path, h, nil).want(t, http.StatusUnauthorized, c.code)
			}
			e.send(t, http.MethodPost, "/v1/workflows", h, strings.NewReader(`{"ticket":"T-1","id":"W-auth"}`)).
				want(t, http.StatusUnauthorized, c.code)
		})
	}
	// The same request with the real token works, and nothing above left a trace.
	ok := e.call(t, http.MethodGet, "/v1/tools", "rep-ana", nil)
	ok.want(t, http.StatusOK, "")
	e.call(t, http.MethodGet, "/v1/workflows/W-auth", "rep-ana", nil).want(t, http.StatusNotFound, "not_found")

	// Every request is logged with its id, and no token ever is.
	log := logs.String()
	if rid := ok.header.Get("X-Request-Id"); !strings.Contains(log, `"request_id":"`+rid+`"`) {
		t.Errorf("the log has no line for request %s", rid)
	}
	maps.Copy(tok, e.st.Tokens)
	for name, secret := range tok {
		sig := secret[strings.LastIndex(secret, ".")+1:]
		if strings.Contains(log, secret) || sig != "" && strings.Contains(log, sig) {
			t.Errorf("the log contains the %s token", name)
		}
	}
}

func TestRoles(t *testing.T) {
	e := start(t, devstack.Options{})
	e.open(t, "rep-ana", "W-ana")
	refundStep := map[string]any{"tool": "issue_refund", "args": refund("O-1001", 3000)}
	cases := []struct {
		who, method, path string
		body              any
		code              string
	}{
		{"lead-dee", http.MethodPost, "/v1/workflows", map[string]string{"ticket": "T-9"}, "forbidden_role"},
		{"ops-ida", http.MethodPost, "/v1/workflows", map[string]string{"ticket": "T-9"}, "forbidden_role"},
		{"lead-dee", http.MethodPost, "/v1/workflows/W-ana/steps", refundStep, "forbidden_role"},
		{"lead-dee", http.MethodPatch, "/v1/workflows/W-ana/steps/1", map[string]any{"args": refund("O-1001", 1)}, "forbidden_role"},
		{"rep-ana", http.MethodGet, "/v1/switches", nil, "forbidden_role"},
		{"lead-dee", http.MethodGet, "/v1/switches", nil, "forbidden_role"},
		{"rep-ana", http.MethodPut, "/v1/switches/issue_refund", map[string]bool{"enabled": false}, "forbidden_role"},
		{"rep-ana", http.MethodPost, "/v1/credentials/epoch", nil, "forbidden_role"},
		{"lead-dee", http.MethodPost, "/v1/credentials/epoch", nil, "forbidden_role"},
		{"rep-ana", http.MethodGet, "/v1/bundles", nil, "forbidden_role"},
		{"lead-dee", http.MethodGet, "/v1/bundles/active", nil, "forbidden_role"},
		{"rep-ana", http.MethodGet, "/v1/approvals?status=pending", nil, "forbidden_role"},
		{"rep-ana", http.MethodGet, "/v1/decisions?workflow=W-ana", nil, "forbidden_role"},
		// A rep cannot see or drive another rep's workflow: that is 404,
		// as for an id nobody used (TestAnotherRepsRecordsAreNotFound).
	}
	for _, c := range cases {
		t.Run(c.who+" "+c.method+" "+c.path, func(t *testing.T) {
			e.call(t, c.method, c.path, c.who, c.body).want(t, http.StatusForbidden, c.code)
		})
	}
	e.wantLedger(t, 0)
	if w := e.getWorkflow(t, "rep-ana", "W-ana"); len(w.Steps) != 0 {
		t.Errorf("refused callers added steps: %+v", w.Steps)
	}
	var sw struct{ Switches map[string]bool }
	e.call(t, http.MethodGet, "/v1/switches", "ops-ida", nil).decode(t, &sw)
	if !sw.Switches["issue_refund"] {
		t.Errorf("a rep switched issue_refund off: %v", sw.Switches)
	}
	if keys := jwksKids(t, e); len(keys) != 1 || keys[0] != "epoch-1" {
		t.Errorf("a refused caller raised the epoch: %v", keys)
	}
}

// Bad bodies get the status sidecar/openapi.json gives them and leave no
// step, decision or ledger entry behind.
func TestBadInput(t *testing.T) {
	e := start(t, devstack.Options{})
	e.open(t, "rep-ana", "W-bad")
	const steps = "/v1/workflows/W-bad/steps"
	const lookup = `{"tool":"lookup_order","args":{"order":"O-1001"}}`
	// padded is a body of exactly n bytes that is valid JSON but has an
	// unknown field: 422 when read, 413 when over the limit.
	padded := func(n int) string {
		const head, tail = `{"tool":"lookup_order","args":{"order":"O-1001"},"pad":"`, `"}`
		return head + strings.Repeat("x", n-len(head)-len(tail)) + tail
	}
	const mib = 1 << 20
	type bad struct {
		name, path, contentType, body string
		chunked                       bool
		status                        int
		code                          string
	}
	cases := []bad{
		{name: "malformed json", body: `{"tool":"issue_refund","args":{`, status: 400, code: "malformed_json"},
		{name: "two json values", body: lookup + `{}`, status: 400, code: "malformed_json"},
		{name: "trailing bracket", body: lookup + ` ]`, status: 400, code: "malformed_json"},
		{name: "empty body", body: ``, status: 400, code: "malformed_json"},
		{name: "duplicate amount", body: `{"tool":"issue_refund","args":{"order":"O-1001","amount":3000,"amount":300}}`, status: 400, code: "malformed_json"},
		{name: "text/plain", contentType: "text/plain", body: lookup, status: 400, code: "unsupported_content_type"},
		{name: "form", contentType: "application/x-www-form-urlencoded", body: "tool=lookup_order", status: 400, code: "unsupported_content_type"},
		{name: "no content type", contentType: "-", body: lookup, status: 400, code: "unsupported_content_type"},
		{name: "exactly 1 MiB", body: padded(mib)},
		{name: "exactly 1 MiB chunked", body: padded(mib), chunked: true},
		{name: "1 MiB and a byte", body: padded(mib + 1), status: 413, code: "body_too_large"},
		{name: "1 MiB and a byte chunked", body: padded(mib + 1), chunked: true, status: 413, code: "body_too_large"},
		{name: "bad workflow id", path: "/v1/workflows", body: `{"ticket":"T-1","id":"../etc"}`},
		{name: "no ticket", path: "/v1/workflows", body: `{"id":"W-no-ticket"}`},
		{name: "ticket is a number", path: "/v1/workflows", body: `{"ticket":7}`},
	}
	// Well-formed JSON that breaks the step schema: 422.
	for name, body := range map[string]string{
		"array body":              `[]`,
		"no tool":                 `{"args":{"order":"O-1001"}}`,
		"unknown top-level field": `{"tool":"issue_refund","args":{"order":"O-1001","amount":3000},"approved_by":"lead-dee"}`,
		"approved_by in args":     `{"tool":"issue_refund","args":{"order":"O-1001","amount":3000,"approved_by":"lead-dee"}}`,
		"float amount":            `{"tool":"issue_refund","args":{"order":"O-1001","amount":30.5}}`,
		"exponent amount":         `{"tool":"issue_refund","args":{"order":"O-1001","amount":3e3}}`,
		"string amount":           `{"tool":"issue_refund","args":{"order":"O-1001","amount":"3000"}}`,
		"negative amount":         `{"tool":"issue_refund","args":{"order":"O-1001","amount":-3000}}`,
		"zero amount":             `{"tool":"issue_refund","args":{"order":"O-1001","amount":0}}`,
		"missing amount":          `{"tool":"issue_refund","args":{"order":"O-1001"}}`,
		"bad order id":            `{"tool":"issue_refund","args":{"order":"1001","amount":3000}}`,
		"order id too long":       `{"tool":"lookup_order","args":{"order":"O-1234567890123"}}`,
		"order id with letters":   `{"tool":"reship_order","args":{"order":"O-10a1"}}`,
		"amount on lookup":        `{"tool":"lookup_order","args":{"order":"O-1001","amount":3000}}`,
		"args not an object":      `{"tool":"lookup_order","args":["O-1001"]}`,
		"amount beyond float64":   `{"tool":"issue_refund","args":{"order":"O-1001","amount":1e400}}`,
		"400-digit amount":        `{"tool":"issue_refund","args":{"order":"O-1001","amount":` + strings.Repeat("9", 400) + `}}`,
	} {
		cases = append(cases, bad{name: name, body: body})
	}
	cases = append(cases, bad{name: "amount above 2^53-1", body: `{"tool":"issue_refund","args":{"order":"O-1001","amount":9007199254740992}}`})

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := http.Header{"Authorization": {"Bearer " + e.st.Tokens["rep-ana"]}, "Content-Type": {"application/json"}}
			switch c.contentType {
			case "":
			case "-":
				h.Del("Content-Type")
			default:
				h.Set("Content-Type", c.contentType)
			}
			var body io.Reader = strings.NewReader(c.body)
			if c.chunked {
				body = io.MultiReader(body) // unknown length: sent chunked
			}
			path, status := cmp.Or(c.path, steps), cmp.Or(c.status, http.StatusUnprocessableEntity)
			e.send(t, http.MethodPost, path, h, body).want(t, status, c.code)
		})
	}
	if w := e.getWorkflow(t, "rep-ana", "W-bad"); len(w.Steps) != 0 {
		t.Errorf("bad input made steps: %+v", w.Steps)
	}
	var log struct{ Decisions []json.RawMessage }
	e.call(t, http.MethodGet, "/v1/decisions?workflow=W-bad", "ops-ida", nil).decode(t, &log)
	if len(log.Decisions) != 0 {
		t.Errorf("bad input reached the policy: %d decisions", len(log.Decisions))
	}
	e.wantLedger(t, 0)
	e.call(t, http.MethodGet, "/v1/workflows/W-no-ticket", "rep-ana", nil).want(t, http.StatusNotFound, "not_found")

	// The same well-formed call works: the cases above failed for their
	// flaw alone (an agent that declares no version has no breaker).
	r, _ := e.propose(t, "rep-ana", "W-bad", "issue_refund", refund("O-1001", 3000))
	r.want(t, http.StatusOK, "")
}

func TestNotFound(t *testing.T) {
	e := start(t, devstack.Options{})
	e.open(t, "rep-ana", "W-404")
	cases := []struct {
		who, method, path string
		body              any
		code              string
	}{
		{"rep-ana", http.MethodGet, "/v1/workflows/W-none", nil, "not_found"},
		{"rep-ana", http.MethodPost, "/v1/workflows/W-none/steps", map[string]any{"tool": "lookup_order", "args": map[string]string{"order": "O-1001"}}, "not_found"},
		{"rep-ana", http.MethodPost, "/v1/workflows/W-none/resume", nil, "not_found"},
		{"rep-ana", http.MethodPatch, "/v1/workflows/W-404/steps/9", map[string]any{"args": refund("O-1001", 100)}, "not_found"},
		{"rep-ana", http.MethodPatch, "/v1/workflows/W-404/steps/zero", map[string]any{"args": refund("O-1001", 100)}, "not_found"},
		{"rep-ana", http.MethodPost, "/v1/workflows/W-404/steps", map[string]any{"tool": "delete_customer", "args": map[string]string{"order": "O-1001"}}, "unknown_tool"},
		{"lead-dee", http.MethodGet, "/v1/approvals/AP-999", nil, "not_found"},
		{"lead-dee", http.MethodPost, "/v1/approvals/AP-999/approve", nil, "not_found"},
		{"lead-dee", http.MethodPost, "/v1/approvals/AP-999/reject", nil, "not_found"},
		{"ops-ida", http.MethodPut, "/v1/switches/delete_customer", map[string]bool{"enabled": false}, "unknown_tool"},
		{"rep-ana", http.MethodGet, "/v1/no-such-route", nil, "not_found"},
		{"", http.MethodGet, "/no-such-route", nil, "not_found"},
	}
	for _, c := range cases {
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			e.call(t, c.method, c.path, c.who, c.body).want(t, http.StatusNotFound, c.code)
		})
	}
	if w := e.getWorkflow(t, "rep-ana", "W-404"); len(w.Steps) != 0 {
		t.Errorf("an unknown tool made a step: %+v", w.Steps)
	}
}

func TestWorkflowIdempotentCreate(t *testing.T) {
	e := start(t, devstack.Options{})
	create := func(who, ticket string) reply {
		return e.call(t, http.MethodPost, "/v1/workflows", who, map[string]string{"id": "W-409", "ticket": ticket})
	}
	first := create("rep-ana", "T-1")
	first.want(t, http.StatusCreated, "")
	var w workflow
	first.decode(t, &w)
	if w.ID != "W-409" || w.Ticket != "T-1" || w.User != "rep-ana" || w.Status != "running" || w.PolicyRevision != "p1" {
		t.Errorf("created %s", first.body)
	}
	again := create("rep-ana", "T-1")
	again.want(t, http.StatusOK, "")
	if !bytes.Equal(again.body, first.body) {
		t.Errorf("repeat answered %s, want the existing %s", again.body, first.body)
	}
	create("rep-ana", "T-2").want(t, http.StatusConflict, "workflow_exists")
	create("rep-ben", "T-1").want(t, http.StatusConflict, "workflow_exists")

	// Without an id the sidecar names the workflow.
	var gen workflow
	r := e.call(t, http.MethodPost, "/v1/workflows", "rep-ana", map[string]string{"ticket": "T-3"})
	r.want(t, http.StatusCreated, "")
	r.decode(t, &gen)
	if gen.ID == "" || gen.ID == "W-409" {
		t.Errorf("generated id %q", gen.ID)
	}
}

func TestPublicEndpoints(t *testing.T) {
	e := start(t, devstack.Options{})
	for _, path := range []string{"/healthz", "/readyz", "/.well-known/jwks.json", "/metrics"} {
		e.call(t, http.MethodGet, path, "", nil).want(t, http.StatusOK, "")
	}

	var tools struct {
		Tools []struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"input_schema"`
		}
	}
	e.call(t, http.MethodGet, "/v1/tools", "rep-ana", nil).decode(t, &tools)
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
		if tl.Description == "" || len(tl.InputSchema) == 0 {
			t.Errorf("tool %s lacks a description or an input schema", tl.Name)
		}
	}
	if got := strings.Join(names, ","); got != "lookup_order,issue_refund,reship_order" {
		t.Errorf("tools %s", got)
	}

	e.call(t, http.MethodPost, "/v1/workflows", "rep-ana", map[string]any{"ticket": "T-m", "id": "W-metrics", "agent_version": "v7"}).
		want(t, http.StatusCreated, "")
	r, _ := e.propose(t, "rep-ana", "W-metrics", "issue_refund", refund("O-1001", 3000))
	r.want(t, http.StatusOK, "")
	m := e.call(t, http.MethodGet, "/metrics", "", nil)
	want := `countersign_decisions_total{agent_version="v7",decision="ALLOW",rule="default-allow-after-checks"} 1`
	if !strings.Contains(string(m.body), want) {
		t.Errorf("/metrics lacks %q", want)
	}
}

// jwksKids returns the kid of every key the sidecar publishes, checking
// each is a public Ed25519 signing key.
func jwksKids(t *testing.T, e *env) []string {
	t.Helper()
	r := e.call(t, http.MethodGet, "/.well-known/jwks.json", "", nil)
	r.want(t, http.StatusOK, "")
	var set struct{ Keys []map[string]any }
	r.decode(t, &set)
	var kids []string
	for _, k := range set.Keys {
		if k["kty"] != "OKP" || k["crv"] != "Ed25519" || k["alg"] != "EdDSA" || k["use"] != "sig" || k["x"] == nil {
			t.Errorf("JWKS key %v: want kty OKP, crv Ed25519, alg EdDSA, use sig", k)
		}
		if _, private := k["d"]; private {
			t.Fatalf("the JWKS publishes a private key")
		}
		kids = append(kids, fmt.Sprint(k["kid"]))
	}
	return kids
}
