package idp

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/countersign/countersign/executor/fixture"
	"github.com/countersign/countersign/executor/money"
)

// Defaults of the OpenID Connect provider.
const (
	// DefaultIDTokenTTL is the life of an ID token: a working day, which
	// is how long the lead page's session it starts lasts.
	DefaultIDTokenTTL = 8 * time.Hour
	// CodeTTL is how long an authorization code may wait to be exchanged.
	CodeTTL = time.Minute
)

// Client is a relying party registered at the provider: its id and
// secret (client_secret_basic or client_secret_post) and the redirect
// URIs it may ask for, compared exactly.
type Client struct {
	ID           string
	Secret       string
	RedirectURIs []string
}

// ProviderOptions configure the OpenID Connect face of an Issuer.
type ProviderOptions struct {
	// URL is the provider's base URL, where it is served: its issuer
	// (the iss of its ID tokens) and the base of its endpoints. Required.
	URL string
	// Clients are the relying parties it knows. At least one.
	Clients []Client
	// People are who may sign in (the /authorize page lists them).
	People []fixture.Person
	// IDTokenTTL is the life of an ID token. Default DefaultIDTokenTTL.
	IDTokenTTL time.Duration
}

// Faults make the provider misbehave as a broken or hostile one would,
// for tests of the relying party: zero values behave.
type Faults struct {
	// Audience, when set, is the aud of the ID tokens instead of the
	// client's id.
	Audience string
	// Nonce, when set, is the nonce of the ID tokens instead of the one
	// the authorization request carried.
	Nonce string
}

// Provider is the dev identity provider speaking OpenID Connect
// (authorization code with PKCE S256), so that the lead page signs in
// through a real redirect, as it does at the organisation's provider:
//
//	GET  /.well-known/openid-configuration  discovery
//	GET  /authorize      a page listing People to pick (no password: dev
//	                     only), or with login_hint=<id> a 302 back to the
//	                     client's redirect URI with a code and the state
//	POST /token          the code, its PKCE verifier and the client's
//	                     secret for an ID token with the person's claims
//	GET  /.well-known/jwks.json  the issuer's public key
//
// Its ID tokens carry iss URL, aud the client id, sub, nonce, iat, exp
// and the claims of the person's bearer tokens (role, region, scopes,
// refund_ceiling, approve_limit), signed with the issuer's key. A code is
// used once (a second exchange, right or wrong, finds it gone) and lives
// CodeTTL. It is safe for concurrent use.
type Provider struct {
	issuer  *Issuer
	url     string
	clients map[string]Client
	people  []fixture.Person
	ttl     time.Duration

	mu     sync.Mutex
	codes  map[string]grant
	faults Faults
}

// grant is an issued code: what the exchange must match, and for whom.
type grant struct {
	client, redirect, challenge, nonce string
	person                             fixture.Person
	expires                            time.Time
}

// Provider returns the OpenID Connect face of the issuer, signing with
// its key.
func (i *Issuer) Provider(o ProviderOptions) (*Provider, error) {
	var errs []error
	if u, err := url.Parse(o.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.HasSuffix(o.URL, "/") {
		errs = append(errs, fmt.Errorf("URL %q must be an absolute http(s) base URL without a trailing slash", o.URL))
	}
	if len(o.Clients) == 0 {
		errs = append(errs, errors.New("no client: register at least one"))
	}
	clients := map[string]Client{}
	for _, c := range o.Clients {
		if c.ID == "" || c.Secret == "" || len(c.RedirectURIs) == 0 {
			errs = append(errs, fmt.Errorf("client %q needs an id, a secret and a redirect URI", c.ID))
		}
		clients[c.ID] = c
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, errors.Join(errs...))
	}
	if o.IDTokenTTL <= 0 {
		o.IDTokenTTL = DefaultIDTokenTTL
	}
	return &Provider{issuer: i, url: o.URL, clients: clients, people: o.People, ttl: o.IDTokenTTL, codes: map[string]grant{}}, nil
}

// URL is the provider's issuer URL.
func (p *Provider) URL() string { return p.url }

// SetFaults makes the provider misbehave from now on (tests only).
func (p *Provider) SetFaults(f Faults) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults = f
}

func (p *Provider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/.well-known/openid-configuration":
		p.discovery(w, r)
	case "/authorize":
		p.authorize(w, r)
	case "/token":
		p.token(w, r)
	case "/.well-known/jwks.json":
		p.issuer.JWKSHandler().ServeHTTP(w, r)
	default:
		oauthError(w, http.StatusNotFound, "not_found", "no such endpoint; see /.well-known/openid-configuration")
	}
}

// discovery is the provider's metadata (OpenID Connect Discovery 1.0).
func (p *Provider) discovery(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                                p.url,
		"authorization_endpoint":                p.url + "/authorize",
		"token_endpoint":                        p.url + "/token",
		"jwks_uri":                              p.url + "/.well-known/jwks.json",
		"response_types_supported":              []string{"code"},
		"grant_types_supported":                 []string{"authorization_code"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{"EdDSA"},
		"code_challenge_methods_supported":      []string{"S256"},
		"token_endpoint_auth_methods_supported": []string{"client_secret_basic", "client_secret_post"},
		"scopes_supported":                      []string{"openid"},
		"claims_supported":                      []string{"iss", "sub", "aud", "exp", "iat", "nonce", "role", "region", "scopes", "refund_ceiling", "approve_limit"},
	})
}

// authorize checks the request (an unknown client or redirect URI is
// answered here, never redirected to), then lists the people to pick, or
// with login_hint sends the browser back with a code.
func (p *Provider) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	c, ok := p.clients[q.Get("client_id")]
	if !ok || !slices.Contains(c.RedirectURIs, q.Get("redirect_uri")) {
		http.Error(w, "unknown client_id, or a redirect_uri not registered for it", http.StatusBadRequest)
		return
	}
	back := func(v url.Values) {
		v.Set("state", q.Get("state"))
		http.Redirect(w, r, q.Get("redirect_uri")+"?"+v.Encode(), http.StatusFound)
	}
	switch {
	case q.Get("response_type") != "code":
		back(url.Values{"error": {"unsupported_response_type"}})
		return
	case !slices.Contains(strings.Fields(q.Get("scope")), "openid"):
		back(url.Values{"error": {"invalid_scope"}, "error_description": {"scope must include openid"}})
		return
	case q.Get("code_challenge_method") != "S256" || len(q.Get("code_challenge")) != 43:
		back(url.Values{"error": {"invalid_request"}, "error_description": {"PKCE with S256 is required"}})
		return
	}
	hint := q.Get("login_hint")
	who, ok := p.person(hint)
	if !ok {
		p.pick(w, r, hint)
		return
	}
	code := rand.Text()
	p.mu.Lock()
	now := p.issuer.clock.Now()
	for k, g := range p.codes {
		if !now.Before(g.expires) {
			delete(p.codes, k)
		}
	}
	p.codes[code] = grant{client: c.ID, redirect: q.Get("redirect_uri"), challenge: q.Get("code_challenge"),
		nonce: q.Get("nonce"), person: who, expires: now.Add(CodeTTL)}
	p.mu.Unlock()
	back(url.Values{"code": {code}})
}

func (p *Provider) person(id string) (fixture.Person, bool) {
	i := slices.IndexFunc(p.people, func(x fixture.Person) bool { return x.ID == id })
	if i < 0 {
		return fixture.Person{}, false
	}
	return p.people[i], true
}

var pickPage = template.Must(template.New("pick").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Sign in · countersign dev identity provider</title></head>
<body><main>
<h1>Dev identity provider: sign in as</h1>
<p>No password: this provider is for development and tests only.</p>
{{with .Unknown}}<p role="alert">No fixture person is called {{.}}.</p>{{end}}
<ul>{{range .People}}
<li><a id="as-{{.ID}}" href="{{.Link}}">{{.ID}}</a> · {{.Role}}{{with .Region}} · {{.}}{{end}}</li>{{end}}
</ul></main></body></html>
`))

// pick lists the people, each a link to this same request with their
// login_hint.
func (p *Provider) pick(w http.ResponseWriter, r *http.Request, unknown string) {
	type choice struct{ ID, Role, Region, Link string }
	data := struct {
		Unknown string
		People  []choice
	}{Unknown: unknown}
	for _, who := range p.people {
		q := r.URL.Query()
		q.Set("login_hint", who.ID)
		data.People = append(data.People, choice{ID: who.ID, Role: who.Role, Region: who.Region, Link: "/authorize?" + q.Encode()})
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'")
	w.Header().Set("Cache-Control", "no-store")
	if err := pickPage.Execute(w, data); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

// token exchanges a code for an ID token: the client authenticated, the
// code its own, unexpired and unused, the redirect URI the one it was
// issued for, and the PKCE verifier the one whose S256 is the challenge.
func (p *Provider) token(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		oauthError(w, http.StatusMethodNotAllowed, "invalid_request", "POST the token request")
		return
	}
	if err := r.ParseForm(); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request", "the body is not a form")
		return
	}
	c, ok := p.client(r)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Basic realm="countersign dev identity provider"`)
		oauthError(w, http.StatusUnauthorized, "invalid_client", "unknown client or wrong secret")
		return
	}
	if r.PostForm.Get("grant_type") != "authorization_code" {
		oauthError(w, http.StatusBadRequest, "unsupported_grant_type", "only authorization_code")
		return
	}
	p.mu.Lock()
	code := r.PostForm.Get("code")
	g, found := p.codes[code]
	delete(p.codes, code) // used once, whether this exchange succeeds or not
	faults := p.faults
	now := p.issuer.clock.Now()
	p.mu.Unlock()
	sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
	switch {
	case !found || !now.Before(g.expires):
		oauthError(w, http.StatusBadRequest, "invalid_grant", "unknown, used or expired code")
		return
	case g.client != c.ID || g.redirect != r.PostForm.Get("redirect_uri"):
		oauthError(w, http.StatusBadRequest, "invalid_grant", "the code was issued to another client or redirect_uri")
		return
	case base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge:
		oauthError(w, http.StatusBadRequest, "invalid_grant", "the code_verifier does not match the code_challenge")
		return
	}
	idt, err := p.idToken(g, c.ID, faults, now)
	if err != nil {
		oauthError(w, http.StatusInternalServerError, "server_error", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"access_token": rand.Text(), "token_type": "Bearer",
		"expires_in": int(p.ttl / time.Second), "id_token": idt})
}

// client authenticates the token request's client: HTTP Basic (its id and
// secret form-encoded, RFC 6749 2.3.1) or the form's client_id and
// client_secret.
func (p *Provider) client(r *http.Request) (Client, bool) {
	id, secret, basic := r.BasicAuth()
	if basic {
		var err1, err2 error
		id, err1 = url.QueryUnescape(id)
		secret, err2 = url.QueryUnescape(secret)
		if err1 != nil || err2 != nil {
			return Client{}, false
		}
	} else {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	c, ok := p.clients[id]
	if !ok || subtle.ConstantTimeCompare([]byte(secret), []byte(c.Secret)) != 1 {
		return Client{}, false
	}
	return c, true
}

// idTokenClaims are an ID token's: OpenID Connect's and the person's
// claims as their bearer tokens carry them.
type idTokenClaims struct {
	Iss           string      `json:"iss"`
	Sub           string      `json:"sub"`
	Aud           string      `json:"aud"`
	IAT           int64       `json:"iat"`
	Exp           int64       `json:"exp"`
	AuthTime      int64       `json:"auth_time"`
	Nonce         string      `json:"nonce,omitempty"`
	Role          string      `json:"role"`
	Region        string      `json:"region,omitempty"`
	Scopes        []string    `json:"scopes"`
	RefundCeiling money.Cents `json:"refund_ceiling,omitempty"`
	ApproveLimit  money.Cents `json:"approve_limit,omitempty"`
}

func (p *Provider) idToken(g grant, client string, f Faults, now time.Time) (string, error) {
	c := idTokenClaims{Iss: p.url, Sub: g.person.ID, Aud: client, IAT: now.Unix(), Exp: now.Add(p.ttl).Unix(), AuthTime: now.Unix(),
		Nonce: g.nonce, Role: g.person.Role, Region: g.person.Region, Scopes: g.person.Scopes,
		RefundCeiling: g.person.RefundCeiling, ApproveLimit: g.person.ApproveLimit}
	if c.Scopes == nil {
		c.Scopes = []string{}
	}
	if f.Audience != "" {
		c.Aud = f.Audience
	}
	if f.Nonce != "" {
		c.Nonce = f.Nonce
	}
	body, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("idp: encode ID token claims for %s: %w", g.person.ID, err)
	}
	return p.issuer.sign(g.person.ID, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// oauthError is an error answer in OAuth 2.0's shape (RFC 6749 5.2).
func oauthError(w http.ResponseWriter, status int, code, description string) {
	writeJSON(w, status, map[string]string{"error": code, "error_description": description})
}
