package signin

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/countersign/countersign/executor/clock"
	"github.com/countersign/countersign/sidecar/authn"
)

// DefaultTimeout bounds each request to the provider (discovery, the
// token exchange, a key fetch) when Options.HTTPClient is nil.
const DefaultTimeout = 10 * time.Second

// CallbackPath is where the provider sends the browser back: the page's
// route, and the path of the redirect URL to register at the provider.
const CallbackPath = "/login/callback"

// AllowedAlgs are the ID token signature algorithms accepted: the
// asymmetric ones a bearer token may use (authn), never none or HMAC.
var AllowedAlgs = []string{oidc.RS256, oidc.ES256, oidc.EdDSA}

// Options configure a Provider.
type Options struct {
	// Issuer is the provider's issuer URL; its discovery document is at
	// Issuer/.well-known/openid-configuration and must name Issuer
	// exactly.
	Issuer string
	// ClientID and ClientSecret are this client's registration at the
	// provider. The ID tokens it issues to the client have the client id
	// as audience.
	ClientID     string
	ClientSecret string
	// RedirectURL is the absolute URL of the page's callback
	// (CallbackPath) as the browser reaches it, registered at the
	// provider.
	RedirectURL string
	// Scopes are asked besides openid. Default none.
	Scopes []string
	// Clock is the now of ID token expiry; nil, the wall clock.
	Clock clock.Clock
	// HTTPClient makes the requests to the provider; nil, one with
	// DefaultTimeout.
	HTTPClient *http.Client
}

// Validate reports every problem of o at once.
func (o Options) Validate() error {
	var errs []error
	if u, err := url.Parse(o.Issuer); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		errs = append(errs, fmt.Errorf("the issuer %q is not an absolute http(s) URL", o.Issuer))
	}
	if o.ClientID == "" {
		errs = append(errs, errors.New("the client id is required: the id this client is registered under at the provider"))
	}
	if o.ClientSecret == "" {
		errs = append(errs, errors.New("the client secret is required: the secret the provider gave this client"))
	}
	if u, err := url.Parse(o.RedirectURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Path != CallbackPath {
		errs = append(errs, fmt.Errorf("the redirect URL %q must be an absolute http(s) URL ending in %s", o.RedirectURL, CallbackPath))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidOptions, errors.Join(errs...))
	}
	return nil
}

// Provider signs people in with one OpenID Connect provider. It is safe
// for concurrent use.
type Provider struct {
	issuer   string
	oauth    oauth2.Config
	verifier *oidc.IDTokenVerifier
	client   *http.Client
}

// New reads the provider's discovery document, so that a provider that
// cannot be reached or does not fit shows at start, not at the first
// sign-in.
func New(ctx context.Context, o Options) (*Provider, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Clock == nil {
		o.Clock = clock.Wall{}
	}
	client := o.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: DefaultTimeout}
	}
	p, err := oidc.NewProvider(oidc.ClientContext(ctx, client), o.Issuer)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrDiscovery, o.Issuer, err)
	}
	var meta struct {
		Algs        []string `json:"id_token_signing_alg_values_supported"`
		AuthMethods []string `json:"token_endpoint_auth_methods_supported"`
		PKCE        []string `json:"code_challenge_methods_supported"`
	}
	if err := p.Claims(&meta); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrDiscovery, o.Issuer, err)
	}
	algs := signingAlgs(meta.Algs)
	if len(algs) == 0 {
		return nil, fmt.Errorf("%w: %s signs ID tokens with %v; countersign accepts only %v: configure the client to use one of them",
			ErrDiscovery, o.Issuer, meta.Algs, AllowedAlgs)
	}
	if len(meta.PKCE) > 0 && !slices.Contains(meta.PKCE, "S256") {
		return nil, fmt.Errorf("%w: %s does not offer PKCE with S256 (it offers %v)", ErrDiscovery, o.Issuer, meta.PKCE)
	}
	endpoint := p.Endpoint()
	// Chosen from the discovery document rather than left to oauth2's
	// auto-detection, which on a refused code tries the other style and
	// so asks the token endpoint twice.
	switch {
	case len(meta.AuthMethods) == 0 || slices.Contains(meta.AuthMethods, "client_secret_basic"):
		endpoint.AuthStyle = oauth2.AuthStyleInHeader
	case slices.Contains(meta.AuthMethods, "client_secret_post"):
		endpoint.AuthStyle = oauth2.AuthStyleInParams
	default:
		return nil, fmt.Errorf("%w: %s authenticates clients only by %v; countersign uses client_secret_basic or client_secret_post",
			ErrDiscovery, o.Issuer, meta.AuthMethods)
	}
	return &Provider{
		issuer: o.Issuer,
		oauth: oauth2.Config{ClientID: o.ClientID, ClientSecret: o.ClientSecret, Endpoint: endpoint,
			RedirectURL: o.RedirectURL, Scopes: append([]string{oidc.ScopeOpenID}, o.Scopes...)},
		verifier: p.Verifier(&oidc.Config{ClientID: o.ClientID, SupportedSigningAlgs: algs, Now: o.Clock.Now}),
		client:   client,
	}, nil
}

// signingAlgs are the algorithms of offered that AllowedAlgs has; a
// provider that names none signs with RS256 (OpenID Connect Discovery).
func signingAlgs(offered []string) []string {
	if len(offered) == 0 {
		return []string{oidc.RS256}
	}
	var out []string
	for _, a := range offered {
		if slices.Contains(AllowedAlgs, a) {
			out = append(out, a)
		}
	}
	return out
}

// Issuer is the provider's issuer URL.
func (p *Provider) Issuer() string { return p.issuer }

// RedirectURL is the callback URL registered at the provider.
func (p *Provider) RedirectURL() string { return p.oauth.RedirectURL }

// Attempt is one sign-in in progress, kept by the browser between leaving
// for the provider and coming back: the state the callback must repeat,
// the nonce the ID token must carry and the PKCE verifier of the code.
type Attempt struct {
	State, Nonce, Verifier string
}

// Begin starts a sign-in: a fresh attempt, and the provider's URL to send
// the browser to.
func (p *Provider) Begin() (Attempt, string) {
	a := Attempt{State: rand.Text(), Nonce: rand.Text(), Verifier: oauth2.GenerateVerifier()}
	return a, p.oauth.AuthCodeURL(a.State, oauth2.S256ChallengeOption(a.Verifier), oidc.Nonce(a.Nonce))
}

// String is the attempt as its cookie keeps it. None of its parts holds
// a '.' (rand.Text is base32, the verifier base64url).
func (a Attempt) String() string { return a.State + "." + a.Nonce + "." + a.Verifier }

// ParseAttempt reads an attempt's cookie value; a value that is not one
// gives the zero Attempt, which no callback matches.
func ParseAttempt(v string) Attempt {
	parts := strings.Split(v, ".")
	if len(parts) != 3 || slices.Contains(parts, "") {
		return Attempt{}
	}
	return Attempt{State: parts[0], Nonce: parts[1], Verifier: parts[2]}
}

// Finish checks the provider's answer q (the callback's query) against
// attempt a, exchanges its code with a's verifier, verifies the ID token
// and its nonce, and returns the ID token (the session keeps it and
// Verify checks it again on every request) and the person it names. The
// refusals are *Error, or *authn.Error for claims that name no person.
func (p *Provider) Finish(ctx context.Context, a Attempt, q url.Values) (string, authn.Principal, error) {
	if a.State == "" || !same(q.Get("state"), a.State) {
		return "", authn.Principal{}, refuse(http.StatusBadRequest, CodeStateInvalid,
			"this sign-in was not begun in this browser, or it was begun again in another tab since, or over 10 minutes ago: sign in again", nil)
	}
	if e := q.Get("error"); e != "" {
		return "", authn.Principal{}, unauthorized(CodeProviderError, fmt.Sprintf(
			"the identity provider refused the sign-in: %s %s; ask its administrator to assign you to this application, or sign in again",
			clip(e), clip(q.Get("error_description"))), nil)
	}
	code := q.Get("code")
	if code == "" {
		return "", authn.Principal{}, unauthorized(CodeExchangeFailed, "the identity provider sent no code back: sign in again", nil)
	}
	ctx = oidc.ClientContext(ctx, p.client)
	tok, err := p.oauth.Exchange(ctx, code, oauth2.VerifierOption(a.Verifier))
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) && re.Response != nil && re.Response.StatusCode < 500 {
			return "", authn.Principal{}, unauthorized(CodeExchangeFailed, fmt.Sprintf(
				"the identity provider refused the code (%s): it was used already, expired, or was not issued to this browser; sign in again",
				clip(re.ErrorCode)), err)
		}
		return "", authn.Principal{}, refuse(http.StatusBadGateway, CodeExchangeFailed,
			"the identity provider's token endpoint could not be reached or failed: try again shortly, and tell an operator if it persists", err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return "", authn.Principal{}, unauthorized(CodeIDTokenInvalid,
			"the identity provider sent no ID token: the client must be registered for OpenID Connect (scope openid)", nil)
	}
	idt, err := p.verify(ctx, raw)
	if err != nil {
		return "", authn.Principal{}, err
	}
	// go-oidc's Verify leaves the nonce to the caller.
	if !same(idt.Nonce, a.Nonce) {
		return "", authn.Principal{}, unauthorized(CodeNonceInvalid,
			"the ID token was not issued for this sign-in (its nonce differs): sign in again", nil)
	}
	who, err := person(idt)
	if err != nil {
		return "", authn.Principal{}, err
	}
	return raw, who, nil
}

// Verify checks an ID token the provider issued to this client (its
// signature, issuer, audience and expiry) and returns the person it
// names: what every request of a session signed in with it does.
func (p *Provider) Verify(ctx context.Context, raw string) (authn.Principal, error) {
	idt, err := p.verify(oidc.ClientContext(ctx, p.client), raw)
	if err != nil {
		return authn.Principal{}, err
	}
	return person(idt)
}

func (p *Provider) verify(ctx context.Context, raw string) (*oidc.IDToken, error) {
	idt, err := p.verifier.Verify(ctx, raw)
	var expired *oidc.TokenExpiredError
	switch {
	case errors.As(err, &expired):
		return nil, unauthorized(CodeTokenExpired, "the sign-in has expired (the ID token's exp has passed): sign in again", err)
	case err != nil && ctx.Err() != nil:
		return nil, fmt.Errorf("signin: verify: %w", ctx.Err())
	case err != nil:
		return nil, unauthorized(CodeIDTokenInvalid, fmt.Sprintf(
			"the ID token does not verify (%v): check the issuer, client id and signing keys configured here against the identity provider", err), err)
	}
	return idt, nil
}

// person maps a verified ID token's claims to the person they name, as a
// bearer token's are.
func person(idt *oidc.IDToken) (authn.Principal, error) {
	var payload json.RawMessage
	if err := idt.Claims(&payload); err != nil {
		return authn.Principal{}, unauthorized(CodeIDTokenInvalid, "the ID token's claims do not read as JSON", err)
	}
	return authn.PersonOf(payload, idt.Issuer, idt.Expiry)
}

// same compares a value a request carries with the one expected, in time
// that does not depend on where they differ.
func same(got, want string) bool {
	return want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// clip bounds what a message repeats of the provider's or a request's
// text.
func clip(s string) string {
	const n = 200
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
