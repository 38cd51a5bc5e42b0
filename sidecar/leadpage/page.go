package leadpage

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/countersign/countersign/executor/clock"
	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/sidecar/authn"
	"github.com/countersign/countersign/sidecar/signin"
)

// Approvals is the engine as the page uses it: the queue as a lead sees
// it, and the very approve and reject that POST /v1/approvals/{id}/approve
// and /reject call, so the approver rules and their codes are the same.
type Approvals interface {
	ApprovalQueue(ctx context.Context, p engine.Person, q engine.ApprovalQuery) ([]engine.ApprovalItem, error)
	Approve(ctx context.Context, p engine.Person, id, comment string) (store.Approval, error)
	Reject(ctx context.Context, p engine.Person, id, comment string) (store.Approval, error)
}

// Verifier verifies a person's bearer token, as every /v1 request is.
type Verifier interface {
	Verify(ctx context.Context, raw string) (authn.Principal, error)
}

// SignIn is the organisation's OpenID Connect provider as the page uses
// it (signin.Provider): begin a sign-in, finish it at the callback, and
// verify the ID token a session keeps on every request.
type SignIn interface {
	Begin() (signin.Attempt, string)
	Finish(ctx context.Context, a signin.Attempt, callback url.Values) (string, authn.Principal, error)
	Verify(ctx context.Context, idToken string) (authn.Principal, error)
	Issuer() string
}

var _ SignIn = (*signin.Provider)(nil)

// Refusal is how the API answers an error: its HTTP status, its stable
// code and a message that says what to do.
type Refusal struct {
	Status  int
	Code    string
	Message string
}

// Options wire a Page. Approvals, Auth and Explain are required to serve
// requests; a Page without them still mounts its routes.
type Options struct {
	Approvals Approvals
	Auth      Verifier
	// Explain maps an error of Approvals or Auth to the API's answer, so
	// that the page shows the code and status the API would.
	Explain func(error) Refusal
	// SignIn, when set, signs leads in with the organisation's OpenID
	// Connect provider (serve --oidc-issuer): the sign-in page offers it.
	SignIn SignIn
	// PasteTokens, in dev mode only, lets a person sign in by pasting a
	// bearer token. Without it (production) POST /login is refused and a
	// sidecar without SignIn says how to configure sign-in.
	PasteTokens bool
	// DevLogins, in dev mode only, are tokens of fixture leads offered as
	// one-click sign-ins, by person id. Empty in production.
	DevLogins map[string]string
	// Refresh is how often the queue's script asks whether the queue
	// changed; zero, DefaultRefresh.
	Refresh time.Duration
	// Clock is the now of sessions and of the time left; nil, the wall clock.
	Clock clock.Clock
	// Sessions keep the signed-in browsers; nil, NewMemorySessions (a
	// sidecar alone on its store). Sidecars sharing a store share them
	// through NewStoreSessions, so that a browser signed in on one is
	// signed in on all.
	Sessions Sessions
	Logger   *slog.Logger
}

// Page is the lead's approval page.
type Page struct {
	opts     Options
	log      *slog.Logger
	sessions Sessions
	views    *views
}

// DefaultRefresh is how often an open queue asks for changes.
const DefaultRefresh = 5 * time.Second

// New builds the page.
func New(o Options) *Page {
	if o.Refresh <= 0 {
		o.Refresh = DefaultRefresh
	}
	if o.Clock == nil {
		o.Clock = clock.Wall{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Sessions == nil {
		o.Sessions = NewMemorySessions(o.Clock)
	}
	return &Page{opts: o, log: o.Logger.With("component", "leadpage"), sessions: o.Sessions, views: newViews()}
}

// Mount adds the page's routes to e.
func (p *Page) Mount(e *echo.Echo) {
	e.GET("/login", p.loginForm)
	e.POST("/login", p.login)
	e.GET("/login/oidc", p.beginSignIn)
	e.GET(signin.CallbackPath, p.finishSignIn)
	e.POST("/logout", p.signedIn(p.logout))
	e.GET("/approvals", p.signedIn(p.queue))
	e.GET("/approvals/fragment", p.signedIn(p.fragment))
	e.GET("/approvals/page.js", p.script)
	e.POST("/approvals/:id/approve", p.signedIn(p.decide(verbApprove)))
	e.POST("/approvals/:id/reject", p.signedIn(p.decide(verbReject)))
}

// Cookie names.
const (
	sessionCookie = "countersign_session"
	// loginCookie carries the sign-in form's CSRF token before there is a
	// session (double submit: the form and the cookie must agree).
	loginCookie = "countersign_login"
)

// visitor is a request of a signed-in browser: its session and the person
// its token names, verified for this request.
type visitor struct {
	id string
	Session
	who authn.Principal
}

func (v visitor) person() engine.Person {
	w := v.who
	return engine.Person{ID: w.ID, Role: w.Role, Region: w.Region, Scopes: w.Scopes,
		RefundCeiling: w.RefundCeiling, ApproveLimit: w.ApproveLimit, Expires: w.Expires}
}

// signedIn admits a request of a live session whose token still verifies,
// and on a POST carries the session's CSRF token; anything else goes back
// to the sign-in page, or for a bad CSRF token is refused (403).
func (p *Page) signedIn(h func(echo.Context, visitor) error) echo.HandlerFunc {
	return func(c echo.Context) error {
		ck, err := c.Cookie(sessionCookie)
		if err != nil {
			return c.Redirect(http.StatusSeeOther, "/login")
		}
		ctx := c.Request().Context()
		ss, err := p.sessions.Get(ctx, ck.Value)
		switch {
		case errors.Is(err, ErrNoSession):
			p.clearCookie(c, sessionCookie)
			return c.Redirect(http.StatusSeeOther, "/login?ended=session_ended")
		case err != nil:
			return p.failed(c, err)
		}
		if !p.opts.Clock.Now().Before(ss.Expires) {
			return p.endSession(c, ck.Value, "token_expired")
		}
		// Verified again on every request, so that a key the issuer
		// rotated out ends the session at once, as it ends the token.
		who, err := p.verify(ctx, ss.Token)
		if err != nil {
			return p.endSession(c, ck.Value, p.refusal(err).Code)
		}
		v := visitor{id: ck.Value, Session: ss, who: who}
		if c.Request().Method == http.MethodPost && !sameToken(c.Request().PostFormValue("csrf"), ss.CSRF) {
			return p.render(c, http.StatusForbidden, "refused", refusedPage{base: p.base(v), Refusal: csrfRefusal})
		}
		return h(c, v)
	}
}

// endSession forgets session id and sends the browser to sign in again,
// saying why. A session that could not be deleted stays harmless: it is
// past its token's exp, or its token no longer verifies, and every request
// checks both again.
func (p *Page) endSession(c echo.Context, id, why string) error {
	if err := p.sessions.End(c.Request().Context(), id); err != nil {
		p.log.Error("ending a session", "why", why, "err", err)
	}
	p.clearCookie(c, sessionCookie)
	return c.Redirect(http.StatusSeeOther, "/login?ended="+why)
}

// csrfRefusal answers a form post without the session's CSRF token.
var csrfRefusal = Refusal{Status: http.StatusForbidden, Code: "csrf_token_invalid",
	Message: "the form did not carry this session's CSRF token; reload the page and submit the form again"}

// loginForm shows the sign-in form.
func (p *Page) loginForm(c echo.Context) error {
	return p.renderLogin(c, http.StatusOK, nil)
}

// login signs a person in, in dev mode, with a pasted bearer token or a
// fixture lead's token.
func (p *Page) login(c echo.Context) error {
	if !p.opts.PasteTokens {
		return p.renderLogin(c, http.StatusForbidden, &pasteRefusal)
	}
	ck, err := c.Cookie(loginCookie)
	if err != nil || !sameToken(c.Request().PostFormValue("csrf"), ck.Value) {
		return p.renderLogin(c, http.StatusForbidden, &csrfRefusal)
	}
	raw := strings.TrimSpace(c.Request().PostFormValue("token"))
	if dev := c.Request().PostFormValue("dev"); dev != "" {
		tok, ok := p.opts.DevLogins[dev]
		if !ok {
			return p.renderLogin(c, http.StatusBadRequest, &Refusal{Status: http.StatusBadRequest, Code: "invalid_request",
				Message: "no dev sign-in for " + dev + "; choose one of the listed leads or paste a token"})
		}
		raw = tok
	}
	if len(raw) > 7 && strings.EqualFold(raw[:7], "bearer ") {
		raw = strings.TrimSpace(raw[7:])
	}
	who, err := p.opts.Auth.Verify(c.Request().Context(), raw)
	if err != nil {
		r := p.opts.Explain(err)
		return p.renderLogin(c, r.Status, &r)
	}
	if who.Role != authn.RoleLead && who.Role != authn.RoleOperator {
		return p.renderLogin(c, http.StatusForbidden, &Refusal{Status: http.StatusForbidden, Code: "forbidden_role",
			Message: "this page is for leads (operators may look); a token of role " + who.Role + " cannot sign in here"})
	}
	if err := p.startSession(c, raw, who); err != nil {
		r := p.explain(err)
		return p.renderLogin(c, r.Status, &r)
	}
	p.clearCookie(c, loginCookie)
	return c.Redirect(http.StatusSeeOther, "/approvals")
}

// startSession ends the browser's previous session, if any, and starts
// one for who on credential: a bearer token, or an ID token marked with
// idTokenPrefix.
func (p *Page) startSession(c echo.Context, credential string, who authn.Principal) error {
	ctx := c.Request().Context()
	if old, err := c.Cookie(sessionCookie); err == nil {
		if err := p.sessions.End(ctx, old.Value); err != nil {
			p.log.Error("ending the previous session at sign-in", "err", err)
		}
	}
	id, _, err := p.sessions.Create(ctx, credential, who.Expires)
	if err != nil {
		return err
	}
	p.setCookie(c, &http.Cookie{Name: sessionCookie, Value: id, Expires: who.Expires})
	p.log.Info("signed in", "sub", who.ID, "role", who.Role, "until", who.Expires)
	return nil
}

// idTokenPrefix marks a session's credential that is an OpenID Connect ID
// token, which SignIn verifies, rather than a bearer token, which Auth
// does. A compact JWS has no space, so the mark cannot be mistaken for
// part of a token; it is sealed with the token in a shared store.
const idTokenPrefix = "id_token "

// verify checks a session's credential again, with what issued it.
func (p *Page) verify(ctx context.Context, credential string) (authn.Principal, error) {
	raw, isIDToken := strings.CutPrefix(credential, idTokenPrefix)
	switch {
	case !isIDToken:
		return p.opts.Auth.Verify(ctx, credential)
	case p.opts.SignIn == nil:
		return authn.Principal{}, &refusalError{noSignIn}
	}
	return p.opts.SignIn.Verify(ctx, raw)
}

// logout ends the session, on every sidecar that shares it. A session
// that could not be deleted is refused, not reported as signed out: the
// cookie would still be good elsewhere.
func (p *Page) logout(c echo.Context, v visitor) error {
	if err := p.sessions.End(c.Request().Context(), v.id); err != nil {
		r := p.explain(err)
		return p.render(c, r.Status, "refused", refusedPage{base: p.base(v), Refusal: r})
	}
	p.clearCookie(c, sessionCookie)
	p.log.Info("signed out", "sub", v.who.ID)
	return c.Redirect(http.StatusSeeOther, "/login?ended=signed_out")
}

// queue shows the approvals the query's view and filters select.
func (p *Page) queue(c echo.Context, v visitor) error {
	return p.renderQueue(c, v, parseListing(c.QueryParams()), http.StatusOK, nil)
}

// verb is what a lead does to an approval.
type verb string

const (
	verbApprove verb = "approve"
	verbReject  verb = "reject"
)

// decide approves or rejects through the engine, exactly as the API does;
// success goes back to the queue, as the form's view and filters had it,
// with a notice, a refusal shows the queue with the code, its meaning and
// the API's status.
func (p *Page) decide(act verb) func(echo.Context, visitor) error {
	return func(c echo.Context, v visitor) error {
		do := p.opts.Approvals.Approve
		if act == verbReject {
			do = p.opts.Approvals.Reject
		}
		id := c.Param("id")
		back := parseListing(backQuery(c.Request().PostFormValue("back")))
		a, err := do(c.Request().Context(), v.person(), id, c.Request().PostFormValue("comment"))
		if err != nil {
			r := p.explain(err)
			return p.renderQueue(c, v, back, r.Status, &refusedAttempt{Refusal: r, ID: id, Verb: string(act)})
		}
		if err := p.sessions.SetNotice(c.Request().Context(), v.id, noticeFor(a)); err != nil {
			p.log.Error("leaving a notice", "err", err) // the decision stands; only its notice is lost
		}
		return c.Redirect(http.StatusSeeOther, back.url("/approvals"))
	}
}

// failed answers a request whose session could not be read.
func (p *Page) failed(c echo.Context, err error) error {
	r := p.explain(err)
	return p.render(c, r.Status, "refused", refusedPage{base: base{Style: p.views.style}, Refusal: r})
}

// explain is refusal, logging what the API would log: an error that is
// the server's, not the caller's.
func (p *Page) explain(err error) Refusal {
	r := p.refusal(err)
	if r.Status >= 500 {
		p.log.Error("request failed", "err", err)
	}
	return r
}

// refusal is how the page answers err: a sign-in's refusal (signin.Error)
// or one of the page's own as they are, anything else as the API would
// (Options.Explain).
func (p *Page) refusal(err error) Refusal {
	var se *signin.Error
	var re *refusalError
	switch {
	case errors.As(err, &se):
		return Refusal{Status: se.Status, Code: se.Code, Message: se.Message}
	case errors.As(err, &re):
		return re.Refusal
	}
	return p.opts.Explain(err)
}

// setCookie sets a session-scoped cookie with the page's flags: HttpOnly,
// SameSite=Strict, and Secure when the request came over TLS.
func (p *Page) setCookie(c echo.Context, ck *http.Cookie) {
	ck.Path, ck.HttpOnly, ck.SameSite = "/", true, http.SameSiteStrictMode
	ck.Secure = c.Request().TLS != nil
	c.SetCookie(ck)
}

// clearCookie tells the browser to forget a cookie.
func (p *Page) clearCookie(c echo.Context, name string) {
	p.setCookie(c, &http.Cookie{Name: name, MaxAge: -1})
}
