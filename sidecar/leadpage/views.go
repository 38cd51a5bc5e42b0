package leadpage

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"html/template"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/countersign/countersign/sidecar/signin"
)

//go:embed templates
var templateFS embed.FS

// views are the parsed pages and the headers every page is sent with.
type views struct {
	pages map[string]*template.Template
	style template.CSS
	// csp allows the page's one stylesheet (by its hash), its one script
	// (a file of this origin: no inline script), the script's fetches of
	// the queue and forms posting to this origin, and nothing else: no
	// frame, no other origin.
	csp string
	// script is the queue's refresher (templates/page.js).
	script []byte
}

func newViews() *views {
	css, err := templateFS.ReadFile("templates/style.css")
	if err != nil {
		panic(err) // embedded: cannot happen in a built binary
	}
	js, err := templateFS.ReadFile("templates/page.js")
	if err != nil {
		panic(err) // embedded: cannot happen in a built binary
	}
	sum := sha256.Sum256(css)
	v := &views{
		pages:  map[string]*template.Template{},
		style:  template.CSS(css),
		script: js,
		csp: "default-src 'none'; style-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'; " +
			"script-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
	}
	for _, name := range []string{"login", "queue", "refused", "continue"} {
		v.pages[name] = template.Must(template.ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html"))
	}
	return v
}

// base is what every page shows: who is signed in, the session's CSRF
// token for the sign-out form, a notice left by the previous request.
type base struct {
	Style  template.CSS
	Who    string
	CSRF   string
	Notice string
}

func (p *Page) base(v visitor) base {
	w := v.who
	who := w.ID + " · " + w.Role
	if w.Region != "" {
		who += " · " + w.Region
	}
	if w.Role == "lead" {
		who += " · approves up to " + w.ApproveLimit.String()
	}
	return base{Style: p.views.style, Who: who, CSRF: v.CSRF}
}

type loginPage struct {
	base
	// SignIn is the identity provider's issuer, when the page signs in
	// with one.
	SignIn string
	// Paste offers the pasted-token form (dev mode), with DevLogins.
	Paste     bool
	DevLogins []string
	// Callback is this sidecar's callback URL as this request reached
	// it: what an operator registers at the identity provider, shown
	// when sign-in is not configured.
	Callback string
	Refused  *Refusal
}

type refusedPage struct {
	base
	Refusal Refusal
}

// render writes page name with data and the page's security headers.
func (p *Page) render(c echo.Context, status int, name string, data any) error {
	var buf bytes.Buffer
	if err := p.views.pages[name].ExecuteTemplate(&buf, "layout", data); err != nil {
		return err
	}
	h := c.Response().Header()
	h.Set("Content-Security-Policy", p.views.csp)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	return c.HTMLBlob(status, buf.Bytes())
}

// renderLogin shows the sign-in form with a fresh CSRF token in the form
// and in its cookie, and, after a failed attempt, why it failed.
func (p *Page) renderLogin(c echo.Context, status int, refused *Refusal) error {
	csrf := randomToken()
	p.setCookie(c, &http.Cookie{Name: loginCookie, Value: csrf})
	data := loginPage{base: base{Style: p.views.style, CSRF: csrf, Notice: endedNotice(c.QueryParam("ended"))},
		Paste: p.opts.PasteTokens, Refused: refused,
		Callback: c.Scheme() + "://" + c.Request().Host + signin.CallbackPath}
	if p.opts.PasteTokens {
		data.DevLogins = slices.Sorted(maps.Keys(p.opts.DevLogins))
	}
	if p.opts.SignIn != nil {
		data.SignIn = p.opts.SignIn.Issuer()
	}
	return p.render(c, status, "login", data)
}

// script serves the queue's refresher, the page's one script, as a file:
// the CSP allows no inline script.
func (p *Page) script(c echo.Context) error {
	h := c.Response().Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-cache")
	return c.Blob(http.StatusOK, "text/javascript; charset=utf-8", p.views.script)
}

// endedNotice says why the sign-in page is shown after a session.
func endedNotice(code string) string {
	switch code {
	case "":
		return ""
	case "signed_out":
		return "You signed out."
	case "session_ended":
		return "Your session ended; sign in again."
	case "token_expired":
		return "Your sign-in expired (its token's exp passed), and the session with it: sign in again."
	}
	return "Your session ended because its token no longer verifies (" + strings.ReplaceAll(code, "_", " ") + "): sign in again."
}
