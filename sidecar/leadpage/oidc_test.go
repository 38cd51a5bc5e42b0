package leadpage_test

import (
	"context"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/countersign/countersign/cmd/devstack"
	prodstack "github.com/countersign/countersign/cmd/stack"
	"github.com/countersign/countersign/executor/sim/idp"
	"github.com/countersign/countersign/sidecar/authn"
)

// atProvider follows the page's redirect to the identity provider, picks
// who there and returns where the provider sends the browser back: the
// callback's path and query.
func atProvider(t *testing.T, b *browser, who string) string {
	t.Helper()
	p := b.get(t, "/login/oidc")
	p.want(t, http.StatusFound, "")
	to, err := url.Parse(p.location())
	if err != nil {
		t.Fatal(err)
	}
	q := to.Query()
	q.Set("login_hint", who)
	to.RawQuery = q.Encode()
	res, err := b.client.Get(to.String()) // the provider's own site: none of the page's cookies
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	back, err := url.Parse(res.Header.Get("Location"))
	if err != nil || res.StatusCode != http.StatusFound {
		t.Fatalf("the provider answered %d to %q", res.StatusCode, res.Header.Get("Location"))
	}
	return back.Path + "?" + back.RawQuery
}

// A lead signs in through the identity provider: the sign-in cookie is
// HttpOnly, SameSite=Lax (the provider's redirect back is cross-site) and
// only for the callback; the callback starts a session whose cookie is
// HttpOnly and SameSite=Strict, on a page that continues to the queue by
// itself; the queue then shows the lead the provider named.
func TestSignInThroughTheIdentityProvider(t *testing.T) {
	st := stack(t, devstack.Options{})
	b := newBrowser(st.Endpoints.Sidecar, nil)
	login := b.get(t, "/login")
	if !strings.Contains(login.body, `id="sign-in-oidc"`) || !strings.Contains(login.body, st.Endpoints.OIDCIssuer) {
		t.Fatalf("the sign-in page does not offer the identity provider: %s", login.body)
	}
	back := atProvider(t, b, "lead-eli")
	ck := b.cookies["countersign_oidc"]
	if ck == nil || !ck.HttpOnly || ck.SameSite != http.SameSiteLaxMode || ck.Path != "/login/callback" || ck.MaxAge <= 0 {
		t.Fatalf("the sign-in attempt's cookie: %+v, want HttpOnly, SameSite=Lax, Path=/login/callback, short-lived", ck)
	}
	p := b.get(t, back)
	p.want(t, http.StatusOK, "")
	session := p.set["countersign_session"]
	if session == nil || !session.HttpOnly || session.SameSite != http.SameSiteStrictMode {
		t.Fatalf("the callback's session cookie: %+v, want HttpOnly and SameSite=Strict", session)
	}
	if c, ok := p.set["countersign_oidc"]; !ok || c.MaxAge >= 0 {
		t.Errorf("the sign-in attempt's cookie is kept after the callback: %+v", c)
	}
	if !strings.Contains(p.body, `http-equiv="refresh" content="0; url=/approvals"`) {
		t.Errorf("the callback does not continue to the queue by itself: %s", p.body)
	}
	q := b.get(t, "/approvals")
	q.want(t, http.StatusOK, "")
	if !strings.Contains(q.body, "lead-eli · lead · US · approves up to $500.00") {
		t.Errorf("the queue does not show who signed in: %s", q.body)
	}
	// The same callback again: the attempt was used.
	b.get(t, back).want(t, http.StatusBadRequest, "oidc_state_invalid")
}

// Every failure of a sign-in through the provider is refused on the
// sign-in page with a code that says which, and starts no session.
func TestSignInThroughTheIdentityProviderRefusals(t *testing.T) {
	st := stack(t, devstack.Options{})
	for _, tc := range []struct {
		name   string
		who    string
		faults idp.Faults
		tamper func(b *browser, back string) string
		status int
		code   string
		says   string
	}{
		{name: "a callback whose state is not the attempt's", who: "lead-eli",
			tamper: func(_ *browser, back string) string { return strings.Replace(back, "state=", "state=X", 1) },
			status: http.StatusBadRequest, code: "oidc_state_invalid", says: "sign in again"},
		{name: "a callback in a browser that did not begin the sign-in", who: "lead-eli",
			tamper: func(b *browser, back string) string { delete(b.cookies, "countersign_oidc"); return back },
			status: http.StatusBadRequest, code: "oidc_state_invalid", says: "not begun in this browser"},
		{name: "an ID token whose nonce is not the attempt's", who: "lead-eli", faults: idp.Faults{Nonce: "replayed"},
			status: http.StatusUnauthorized, code: "oidc_nonce_invalid", says: "nonce"},
		{name: "an ID token for another audience", who: "lead-eli", faults: idp.Faults{Audience: "another-app"},
			status: http.StatusUnauthorized, code: "oidc_id_token_invalid", says: "audience"},
		{name: "a rep", who: "rep-ben", status: http.StatusForbidden, code: "forbidden_role", says: "rep-ben is a rep"},
		{name: "an operator", who: "ops-ida", status: http.StatusForbidden, code: "forbidden_role", says: "ops-ida is a operator"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st.OIDC.SetFaults(tc.faults)
			t.Cleanup(func() { st.OIDC.SetFaults(idp.Faults{}) })
			b := newBrowser(st.Endpoints.Sidecar, nil)
			back := atProvider(t, b, tc.who)
			if tc.tamper != nil {
				back = tc.tamper(b, back)
			}
			p := b.get(t, back)
			p.want(t, tc.status, tc.code)
			if !strings.Contains(p.body, tc.says) {
				t.Errorf("the refusal does not say %q: %s", tc.says, p.body)
			}
			if _, ok := p.set["countersign_session"]; ok {
				t.Errorf("a refused sign-in set a session cookie")
			}
			if q := b.get(t, "/approvals"); q.status != http.StatusSeeOther {
				t.Errorf("after a refused sign-in GET /approvals answers %d, want 303 to sign in", q.status)
			}
		})
	}
}

// A production sidecar without an identity provider says how to configure
// sign-in (the flags and the redirect URL to register) and takes no
// pasted token; pasting is for dev mode.
func TestProductionWithoutSignInSaysHowToConfigureIt(t *testing.T) {
	dev := stack(t, devstack.Options{})
	prod, err := prodstack.Start(context.Background(), prodstack.Options{
		DataDir: filepath.Join(t.TempDir(), "prod"), Agent: devstack.AgentID,
		LedgerURL: dev.Endpoints.Ledger, OrdersURL: dev.Endpoints.Orders,
		Issuers:       []authn.Issuer{{Name: dev.IdP.Name(), Keys: dev.IdP.JWKS()}},
		PolicyTimeout: devstack.InProcessPolicyTimeout,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prod.Close() })
	b := newBrowser(prod.URL, nil)
	login := b.get(t, "/login")
	login.want(t, http.StatusOK, "")
	for _, want := range []string{`id="configure"`, "--oidc-issuer URL --oidc-client-id ID", "--oidc-client-secret-file FILE",
		prod.URL + "/login/callback"} {
		if !strings.Contains(login.body, want) {
			t.Errorf("the sign-in page does not say %q: %s", want, login.body)
		}
	}
	if strings.Contains(login.body, `name="token"`) || strings.Contains(login.body, `id="sign-in-oidc"`) {
		t.Errorf("a production sidecar without a provider offers a token box or a provider: %s", login.body)
	}
	b.post(t, "/login", url.Values{"csrf": {b.cookies["countersign_login"].Value}, "token": {dev.Tokens["lead-eli"]}}).
		want(t, http.StatusForbidden, "token_sign_in_disabled")
	b.get(t, "/login/oidc").want(t, http.StatusNotFound, "oidc_not_configured")
}
