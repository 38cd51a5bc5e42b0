package leadpage_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/cmd/devstack"
	"github.com/countersign/countersign/executor/fixture"
	"github.com/countersign/countersign/executor/simclock"
)

// A lead signs in by pasting their token: the session cookie is HttpOnly,
// SameSite=Strict, for the whole site, not Secure over plain HTTP, and
// lasts as long as the token.
func TestSignInWithAPastedLeadToken(t *testing.T) {
	clk := simclock.New(time.Now().UTC().Truncate(time.Second))
	st := stack(t, devstack.Options{Clock: clk})
	b := newBrowser(st.Endpoints.Sidecar, nil)

	form := b.get(t, "/login")
	form.want(t, http.StatusOK, "")
	wantFlags(t, form.set["countersign_login"], false)
	if csp := form.header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("Content-Security-Policy %q, want default-src 'none'", csp)
	}
	p := b.post(t, "/login", url.Values{"csrf": {form.csrf(t)}, "token": {"Bearer " + st.Tokens["lead-eli"]}})
	p.want(t, http.StatusSeeOther, "")
	ck := p.set["countersign_session"]
	wantFlags(t, ck, false)
	if len(ck.Value) != 43 {
		t.Errorf("session id %q: want 256 bits, base64url (43 characters)", ck.Value)
	}
	if want := clk.Now().Add(24 * time.Hour); !ck.Expires.Equal(want) {
		t.Errorf("session cookie expires %s, want the token's exp %s", ck.Expires, want)
	}
	if c, ok := p.set["countersign_login"]; !ok || c.MaxAge >= 0 {
		t.Errorf("the sign-in form's cookie is kept after signing in: %+v", c)
	}
	q := b.get(t, "/approvals")
	q.want(t, http.StatusOK, "")
	if !strings.Contains(q.body, "lead-eli · lead · US · approves up to $500.00") {
		t.Errorf("the queue does not say who is signed in: %s", q.body)
	}
	if !strings.Contains(q.body, "Nothing is waiting for your approval.") {
		t.Errorf("an empty queue does not say so: %s", q.body)
	}
}

// Under TLS the session cookie is also Secure.
func TestSessionCookieIsSecureUnderTLS(t *testing.T) {
	st := stack(t, devstack.Options{})
	srv := httptest.NewTLSServer(st.Server)
	t.Cleanup(srv.Close)
	b := newBrowser(srv.URL, srv.Client())
	csrf := b.get(t, "/login").csrf(t)
	p := b.post(t, "/login", url.Values{"csrf": {csrf}, "token": {st.Tokens["lead-eli"]}})
	p.want(t, http.StatusSeeOther, "")
	wantFlags(t, p.set["countersign_session"], true)
}

func wantFlags(t *testing.T, c *http.Cookie, secure bool) {
	t.Helper()
	switch {
	case c == nil:
		t.Fatal("the cookie was not set")
	case !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.Secure != secure:
		t.Errorf("cookie %s: HttpOnly %v, SameSite %v, Path %q, Secure %v; want HttpOnly, SameSite=Strict, Path=/, Secure %v",
			c.Name, c.HttpOnly, c.SameSite, c.Path, c.Secure, secure)
	}
}

// Sign-in refuses, with the code the API would give, every token it would
// refuse and every token that is not a lead's or an operator's, and a form
// without its CSRF token; no session is started.
func TestSignInRefusals(t *testing.T) {
	clk := simclock.New(time.Now().UTC().Truncate(time.Second))
	st := stack(t, devstack.Options{Clock: clk})
	eli, _ := fixture.PersonByID("lead-eli")
	soon, err := st.IdP.Sign(eli, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Minute)
	for _, tc := range []struct {
		name   string
		form   func(csrf string) url.Values
		status int
		code   string
	}{
		{"a rep's token", func(c string) url.Values { return url.Values{"csrf": {c}, "token": {st.Tokens["rep-ben"]}} },
			http.StatusForbidden, "forbidden_role"},
		{"a token that is not a JWS", func(c string) url.Values { return url.Values{"csrf": {c}, "token": {"not-a-token"}} },
			http.StatusUnauthorized, "token_malformed"},
		{"an expired token", func(c string) url.Values { return url.Values{"csrf": {c}, "token": {soon}} },
			http.StatusUnauthorized, "token_expired"},
		{"a lead's token with its signature altered", func(c string) url.Values {
			tok := st.Tokens["lead-eli"]
			return url.Values{"csrf": {c}, "token": {tok[:len(tok)-4] + "AAAA"}}
		}, http.StatusUnauthorized, "bad_signature"},
		{"no token", func(c string) url.Values { return url.Values{"csrf": {c}} },
			http.StatusUnauthorized, "token_missing"},
		{"a lead's token without the form's CSRF token", func(string) url.Values { return url.Values{"token": {st.Tokens["lead-eli"]}} },
			http.StatusForbidden, "csrf_token_invalid"},
		{"a lead's token with another CSRF token", func(string) url.Values {
			return url.Values{"csrf": {strings.Repeat("A", 43)}, "token": {st.Tokens["lead-eli"]}}
		}, http.StatusForbidden, "csrf_token_invalid"},
		{"a dev sign-in for a rep", func(c string) url.Values { return url.Values{"csrf": {c}, "dev": {"rep-ben"}} },
			http.StatusBadRequest, "invalid_request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBrowser(st.Endpoints.Sidecar, nil)
			csrf := b.get(t, "/login").csrf(t)
			p := b.post(t, "/login", tc.form(csrf))
			p.want(t, tc.status, tc.code)
			if _, ok := p.set["countersign_session"]; ok {
				t.Errorf("a session cookie was set")
			}
			if q := b.get(t, "/approvals"); q.status != http.StatusSeeOther || q.location() != "/login" {
				t.Errorf("after a refused sign-in GET /approvals answers %d to %q, want 303 to /login", q.status, q.location())
			}
		})
	}
}

// Without a live session every route of the page sends the browser to the
// sign-in page and does nothing.
func TestNotSignedInGoesToSignIn(t *testing.T) {
	st := stack(t, devstack.Options{})
	id := requestRefund(t, st, "rep-ben", "W1", "O-1004", 40000)
	for _, tc := range []struct {
		name   string
		cookie string
	}{{"no cookie", ""}, {"a made-up session id", strings.Repeat("x", 43)}} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBrowser(st.Endpoints.Sidecar, nil)
			if tc.cookie != "" {
				b.cookies["countersign_session"] = &http.Cookie{Name: "countersign_session", Value: tc.cookie}
			}
			for _, p := range []page{
				b.get(t, "/approvals"),
				b.post(t, "/approvals/"+id+"/approve", url.Values{"csrf": {"x"}}),
				b.post(t, "/logout", url.Values{"csrf": {"x"}}),
			} {
				if p.status != http.StatusSeeOther || !strings.HasPrefix(p.location(), "/login") {
					t.Errorf("answered %d to %q, want 303 to /login", p.status, p.location())
				}
			}
		})
	}
	if s, _, _ := approvalStatus(t, st, id); s != "pending" {
		t.Errorf("approval %s is %s, want pending", id, s)
	}
}

// A signed-in form post without the session's CSRF token is refused with
// 403 and changes nothing, sign-out included.
func TestFormPostWithoutCSRFTokenIsRefused(t *testing.T) {
	st := stack(t, devstack.Options{})
	id := requestRefund(t, st, "rep-ben", "W1", "O-1004", 40000)
	b := newBrowser(st.Endpoints.Sidecar, nil)
	b.signIn(t, st.Tokens["lead-eli"])
	other := newBrowser(st.Endpoints.Sidecar, nil)
	other.signIn(t, st.Tokens["lead-eli"])
	otherCSRF := other.get(t, "/approvals").csrf(t)
	for _, tc := range []struct {
		name, path string
		form       url.Values
	}{
		{"approve without a token", "/approvals/" + id + "/approve", url.Values{"comment": {"ok"}}},
		{"reject with an empty token", "/approvals/" + id + "/reject", url.Values{"csrf": {""}}},
		{"approve with another session's token", "/approvals/" + id + "/approve", url.Values{"csrf": {otherCSRF}}},
		{"sign out without a token", "/logout", url.Values{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b.post(t, tc.path, tc.form).want(t, http.StatusForbidden, "csrf_token_invalid")
		})
	}
	if s, _, _ := approvalStatus(t, st, id); s != "pending" {
		t.Errorf("approval %s is %s, want pending", id, s)
	}
	b.get(t, "/approvals").want(t, http.StatusOK, "")
}

// Sign-out ends the session on the server: the old cookie no longer
// works, even if the browser kept it.
func TestSignOutEndsTheSession(t *testing.T) {
	st := stack(t, devstack.Options{})
	b := newBrowser(st.Endpoints.Sidecar, nil)
	b.signIn(t, st.Tokens["lead-eli"])
	old := *b.cookies["countersign_session"]
	p := b.post(t, "/logout", url.Values{"csrf": {b.get(t, "/approvals").csrf(t)}})
	if p.status != http.StatusSeeOther || p.location() != "/login?ended=signed_out" {
		t.Fatalf("sign-out answered %d to %q, want 303 to /login?ended=signed_out", p.status, p.location())
	}
	if c := p.set["countersign_session"]; c == nil || c.MaxAge >= 0 {
		t.Errorf("sign-out does not clear the cookie: %+v", c)
	}
	b.cookies["countersign_session"] = &old
	if q := b.get(t, "/approvals"); q.status != http.StatusSeeOther || !strings.HasPrefix(q.location(), "/login") {
		t.Errorf("the old cookie still opens the queue: %d %q", q.status, q.location())
	}
	if l := b.get(t, "/login?ended=signed_out"); !strings.Contains(l.body, "You signed out.") {
		t.Errorf("the sign-in page does not say the lead signed out: %s", l.body)
	}
}

// The session ends when its token expires: each request verifies the
// token again.
func TestSessionEndsWhenTheTokenExpires(t *testing.T) {
	clk := simclock.New(time.Now().UTC().Truncate(time.Second))
	st := stack(t, devstack.Options{Clock: clk})
	eli, _ := fixture.PersonByID("lead-eli")
	tok, err := st.IdP.Sign(eli, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	b := newBrowser(st.Endpoints.Sidecar, nil)
	b.signIn(t, tok)
	clk.Advance(9 * time.Minute)
	b.get(t, "/approvals").want(t, http.StatusOK, "")
	clk.Advance(time.Minute)
	p := b.get(t, "/approvals")
	if p.status != http.StatusSeeOther || !strings.HasPrefix(p.location(), "/login?ended=") {
		t.Fatalf("after the token's exp GET /approvals answers %d to %q, want 303 to /login", p.status, p.location())
	}
	if c := p.set["countersign_session"]; c == nil || c.MaxAge >= 0 {
		t.Errorf("the ended session's cookie is not cleared: %+v", c)
	}
}

// GET / sends a browser to the queue and tells an API client where the
// contract is.
func TestRootSendsBrowsersToTheQueue(t *testing.T) {
	st := stack(t, devstack.Options{})
	if p := newBrowser(st.Endpoints.Sidecar, nil).get(t, "/"); p.status != http.StatusSeeOther || p.location() != "/approvals" {
		t.Errorf("a browser's GET / answers %d to %q, want 303 to /approvals", p.status, p.location())
	}
	s, body := api(t, st, http.MethodGet, "/", "", nil)
	if s != http.StatusOK || !strings.Contains(string(body), `"openapi":"/openapi.json"`) {
		t.Errorf("an API client's GET / answers %d %s, want the index", s, body)
	}
}
