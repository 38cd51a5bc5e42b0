package leadpage

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/countersign/countersign/sidecar/authn"
	"github.com/countersign/countersign/sidecar/signin"
)

// attemptCookie carries a sign-in at the identity provider (signin.Attempt)
// from GET /login/oidc to the callback, and only there.
const attemptCookie = "countersign_oidc"

// attemptTTL is how long a browser may take at the identity provider.
const attemptTTL = 10 * time.Minute

// Refusals of the page's own sign-in.
var (
	pasteRefusal = Refusal{Status: http.StatusForbidden, Code: "token_sign_in_disabled",
		Message: "signing in with a pasted token is for dev mode (serve --dev); sign in with your identity provider"}
	noSignIn = Refusal{Status: http.StatusNotFound, Code: "oidc_not_configured",
		Message: "this sidecar has no identity provider to sign in with: an operator starts it with --oidc-issuer, --oidc-client-id and --oidc-client-secret-file"}
)

// beginSignIn sends the browser to the identity provider with a fresh
// attempt, which the browser keeps until the callback. The cookie is
// SameSite=Lax, not Strict: the provider's redirect back is a navigation
// from another site, on which a Strict cookie would not be sent.
func (p *Page) beginSignIn(c echo.Context) error {
	if p.opts.SignIn == nil {
		return p.renderLogin(c, noSignIn.Status, &noSignIn)
	}
	a, to := p.opts.SignIn.Begin()
	c.SetCookie(&http.Cookie{Name: attemptCookie, Value: a.String(), Path: signin.CallbackPath, MaxAge: int(attemptTTL / time.Second),
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: c.Request().TLS != nil})
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.Redirect(http.StatusFound, to)
}

// finishSignIn is the identity provider's redirect back: the attempt
// (used once, whatever the outcome) must match, the ID token verify and
// name a lead. The session's cookie is set on a page that then continues
// to the queue itself (continuePage): on a redirect from here, still part
// of the navigation the provider's site began, a browser would not send
// the SameSite=Strict cookie, and the queue would send it back to sign in.
func (p *Page) finishSignIn(c echo.Context) error {
	if p.opts.SignIn == nil {
		return p.renderLogin(c, noSignIn.Status, &noSignIn)
	}
	var a signin.Attempt
	if ck, err := c.Cookie(attemptCookie); err == nil {
		a = signin.ParseAttempt(ck.Value)
	}
	c.SetCookie(&http.Cookie{Name: attemptCookie, Path: signin.CallbackPath, MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: c.Request().TLS != nil})
	raw, who, err := p.opts.SignIn.Finish(c.Request().Context(), a, c.QueryParams())
	if err != nil {
		r := p.explain(err)
		p.log.Info("sign-in refused", "code", r.Code, "err", err)
		return p.renderLogin(c, r.Status, &r)
	}
	if who.Role != authn.RoleLead {
		r := Refusal{Status: http.StatusForbidden, Code: "forbidden_role", Message: "this page is for leads, and the identity provider says " +
			who.ID + " is a " + who.Role + ": ask its administrator for the role claim lead if you approve refunds"}
		p.log.Info("sign-in refused", "code", r.Code, "sub", who.ID, "role", who.Role)
		return p.renderLogin(c, r.Status, &r)
	}
	if err := p.startSession(c, idTokenPrefix+raw, who); err != nil {
		r := p.explain(err)
		return p.renderLogin(c, r.Status, &r)
	}
	return p.render(c, http.StatusOK, "continue", continuePage{base: base{Style: p.views.style}, To: "/approvals"})
}

// continuePage moves on to To by itself (meta refresh: no script needed),
// with a link for a browser that does not.
type continuePage struct {
	base
	To string
}
