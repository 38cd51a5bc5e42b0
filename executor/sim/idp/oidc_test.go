package idp_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jwt"

	"github.com/countersign/countersign/executor/fixture"
	"github.com/countersign/countersign/executor/sim/idp"
)

const redirect = "http://127.0.0.1:1/login/callback"

// provider serves the dev issuer's OpenID Connect face on a real socket,
// with one client, "page", whose secret is "s3cret".
func provider(t *testing.T) (*idp.Provider, *httptest.Server) {
	t.Helper()
	iss := open(t, t.TempDir())
	srv := httptest.NewUnstartedServer(nil)
	base := "http://" + srv.Listener.Addr().String()
	p, err := iss.Provider(idp.ProviderOptions{URL: base, People: fixture.People(),
		Clients: []idp.Client{{ID: "page", Secret: "s3cret", RedirectURIs: []string{redirect}}}})
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = p
	srv.Start()
	t.Cleanup(srv.Close)
	return p, srv
}

var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

const verifier = "a-pkce-verifier-of-at-least-forty-three-characters"

func challenge() string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// authorize asks for a code as hint and returns where the provider sends
// the browser.
func authorize(t *testing.T, base string, q url.Values) *http.Response {
	t.Helper()
	res, err := noRedirect.Get(base + "/authorize?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return res
}

func authRequest(hint string) url.Values {
	q := url.Values{"client_id": {"page"}, "redirect_uri": {redirect}, "response_type": {"code"}, "scope": {"openid"},
		"state": {"st-1"}, "nonce": {"n-1"}, "code_challenge": {challenge()}, "code_challenge_method": {"S256"}}
	if hint != "" {
		q.Set("login_hint", hint)
	}
	return q
}

// exchange posts a token request and decodes its JSON answer.
func exchange(t *testing.T, base string, form url.Values, id, secret string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(id, secret)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, out
}

// Discovery names the provider's endpoints; /authorize without a
// login_hint lists the people, with one sends the browser back with a
// code and the state; the code, the client's secret and the PKCE
// verifier get an ID token for the client with the person's claims and
// the request's nonce, signed with the issuer's key; the code works once.
func TestOIDCAuthorizationCodeWithPKCE(t *testing.T) {
	p, srv := provider(t)
	var disc map[string]any
	res, err := http.Get(srv.URL + "/.well-known/openid-configuration")
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(res.Body).Decode(&disc)
	res.Body.Close()
	if disc["issuer"] != p.URL() || disc["token_endpoint"] != p.URL()+"/token" || disc["jwks_uri"] != p.URL()+"/.well-known/jwks.json" {
		t.Errorf("discovery: %v", disc)
	}

	page := authorize(t, srv.URL, authRequest(""))
	body, _ := io.ReadAll(page.Body)
	if page.StatusCode != http.StatusOK || !strings.Contains(string(body), `id="as-lead-eli"`) || !strings.Contains(string(body), "login_hint=lead-eli") {
		t.Fatalf("the people to pick: %d %s", page.StatusCode, body)
	}

	back := authorize(t, srv.URL, authRequest("lead-eli"))
	loc, _ := url.Parse(back.Header.Get("Location"))
	code := loc.Query().Get("code")
	if back.StatusCode != http.StatusFound || loc.Scheme+"://"+loc.Host+loc.Path != redirect || loc.Query().Get("state") != "st-1" || code == "" {
		t.Fatalf("with login_hint: %d to %s, want 302 to %s with a code and state st-1", back.StatusCode, loc, redirect)
	}
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirect}, "code_verifier": {verifier}}
	status, tok := exchange(t, srv.URL, form, "page", "s3cret")
	raw, _ := tok["id_token"].(string)
	if status != http.StatusOK || raw == "" {
		t.Fatalf("exchange: %d %v", status, tok)
	}
	idt, err := jwt.ParseString(raw, jwt.WithKeySet(idpKeys(t, srv.URL)), jwt.WithClock(jwt.ClockFunc(func() time.Time { return t0 })),
		jwt.WithIssuer(p.URL()), jwt.WithAudience("page"))
	if err != nil {
		t.Fatalf("the ID token does not verify with the provider's JWKS: %v", err)
	}
	var nonce, role string
	var limit float64
	idt.Get("nonce", &nonce)
	idt.Get("role", &role)
	idt.Get("approve_limit", &limit)
	if sub, _ := idt.Subject(); sub != "lead-eli" || nonce != "n-1" || role != "lead" || limit != 50000 {
		t.Errorf("ID token: sub %s nonce %s role %s approve_limit %v", sub, nonce, role, limit)
	}
	if status, out := exchange(t, srv.URL, form, "page", "s3cret"); status != http.StatusBadRequest || out["error"] != "invalid_grant" {
		t.Errorf("the same code again: %d %v, want 400 invalid_grant", status, out)
	}
}

// What the token endpoint refuses, and what /authorize will not send a
// browser back for.
func TestOIDCRefusals(t *testing.T) {
	_, srv := provider(t)
	code := func() string {
		loc, _ := url.Parse(authorize(t, srv.URL, authRequest("lead-eli")).Header.Get("Location"))
		return loc.Query().Get("code")
	}
	form := func(code, verifier string) url.Values {
		return url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirect}, "code_verifier": {verifier}}
	}
	for name, c := range map[string]struct {
		form       url.Values
		id, secret string
		status     int
		err        string
	}{
		"a wrong secret":                 {form(code(), verifier), "page", "guess", http.StatusUnauthorized, "invalid_client"},
		"an unknown client":              {form(code(), verifier), "other", "s3cret", http.StatusUnauthorized, "invalid_client"},
		"a verifier that is not the one": {form(code(), verifier+"x"), "page", "s3cret", http.StatusBadRequest, "invalid_grant"},
		"a code never issued":            {form("made-up", verifier), "page", "s3cret", http.StatusBadRequest, "invalid_grant"},
	} {
		t.Run(name, func(t *testing.T) {
			if status, out := exchange(t, srv.URL, c.form, c.id, c.secret); status != c.status || out["error"] != c.err {
				t.Errorf("%d %v, want %d %s", status, out, c.status, c.err)
			}
		})
	}
	q := authRequest("lead-eli")
	q.Set("redirect_uri", "http://evil.example/cb")
	if res := authorize(t, srv.URL, q); res.StatusCode != http.StatusBadRequest || res.Header.Get("Location") != "" {
		t.Errorf("an unregistered redirect_uri: %d to %q, want 400 and no redirect", res.StatusCode, res.Header.Get("Location"))
	}
	q = authRequest("lead-eli")
	q.Del("code_challenge")
	loc, _ := url.Parse(authorize(t, srv.URL, q).Header.Get("Location"))
	if loc.Query().Get("error") != "invalid_request" || loc.Query().Get("code") != "" {
		t.Errorf("without PKCE: sent back to %s, want error=invalid_request and no code", loc)
	}
}

func TestProviderOptions(t *testing.T) {
	iss := open(t, t.TempDir())
	if _, err := iss.Provider(idp.ProviderOptions{URL: "http://127.0.0.1:1/"}); !errors.Is(err, idp.ErrInvalidOptions) {
		t.Errorf("a trailing slash and no client: %v, want ErrInvalidOptions", err)
	}
}

func idpKeys(t *testing.T, base string) jwk.Set {
	t.Helper()
	set, err := jwk.Fetch(t.Context(), base+"/.well-known/jwks.json")
	if err != nil {
		t.Fatal(err)
	}
	return set
}
