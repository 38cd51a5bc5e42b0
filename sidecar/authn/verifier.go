package authn

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/countersign/countersign/executor/clock"
	"github.com/countersign/countersign/executor/identity"
	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/strictjson"
	"github.com/lestrrat-go/httprc/v3"
	"github.com/lestrrat-go/httprc/v3/errsink"
	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
	"github.com/lestrrat-go/jwx/v3/jwt"
)

// Roles, the values of the role claim.
const (
	RoleRep      = "rep"
	RoleLead     = "lead"
	RoleOperator = "operator"
)

// Defaults.
const (
	DefaultAudience        = "countersign"
	DefaultRefetchGap      = 10 * time.Second
	DefaultFetchTimeout    = 5 * time.Second
	DefaultRefreshInterval = 15 * time.Minute
	// MaxLeeway bounds Options.Leeway: tolerance for clock skew, not a way
	// to extend tokens.
	MaxLeeway = 5 * time.Minute
	// MaxTokenBytes bounds the size of a token Verify will look at.
	MaxTokenBytes = 16 << 10
	// MaxSubjectBytes bounds sub, the person's id, which is stored as a
	// workflow's user and shown to leads.
	MaxSubjectBytes = 128
)

// Issuer is one trusted identity provider: the iss value its tokens carry
// and exactly one source of its public keys.
type Issuer struct {
	// Name is the iss claim of the issuer's tokens.
	Name string

	// JWKSFile is a path to a JWKS document. It is read at New and read
	// again when a token names an unknown kid (rate limited), so keys can
	// be rotated by replacing the file.
	JWKSFile string

	// JWKSURL is an http(s) URL of a JWKS document, kept by jwx's jwk.Cache:
	// fetched at New, refreshed every RefreshInterval in the background and
	// at once (rate limited) when a token names an unknown kid.
	JWKSURL string

	// Keys is an in-memory key set (dev mode passes the dev issuer's).
	Keys jwk.Set

	// RefreshInterval is the background refresh period of JWKSURL.
	// Default DefaultRefreshInterval.
	RefreshInterval time.Duration
}

// Options configure a Verifier.
type Options struct {
	// Issuers are the trusted identity providers. At least one.
	Issuers []Issuer
	// Audience must be one of the token's aud values. Default "countersign".
	Audience string
	// Clock is the now of exp, nbf, iat and the refresh rate limit. Nil
	// means the wall clock.
	Clock clock.Clock
	// Leeway tolerates clock skew between issuer and sidecar for exp, nbf
	// and iat. Zero means none; at most MaxLeeway.
	Leeway time.Duration
	// RefetchGap is the least time between two key refreshes forced by an
	// unknown kid, per issuer. Default DefaultRefetchGap.
	RefetchGap time.Duration
	// FetchTimeout bounds one JWKS fetch. Default DefaultFetchTimeout.
	FetchTimeout time.Duration
	// Logger receives key refreshes and their failures (never tokens).
	// Default: discard.
	Logger *slog.Logger
}

// validate reports every problem at once.
func (o *Options) validate() error {
	var errs []error
	if len(o.Issuers) == 0 {
		errs = append(errs, errors.New("no trusted issuer: configure at least one (name and JWKS file, URL or key set)"))
	}
	if o.Leeway < 0 || o.Leeway > MaxLeeway {
		errs = append(errs, fmt.Errorf("option Leeway %s must be between 0 and %s", o.Leeway, MaxLeeway))
	}
	if o.RefetchGap < 0 || o.FetchTimeout < 0 {
		errs = append(errs, errors.New("RefetchGap and FetchTimeout must not be negative"))
	}
	seen := map[string]bool{}
	for i, is := range o.Issuers {
		where := fmt.Sprintf("issuer #%d (%q)", i+1, is.Name)
		if is.Name == "" {
			errs = append(errs, fmt.Errorf("%s: Name (the iss value) is required", where))
		} else if seen[is.Name] {
			errs = append(errs, fmt.Errorf("%s: configured twice", where))
		}
		seen[is.Name] = true
		n := 0
		for _, set := range []bool{is.JWKSFile != "", is.JWKSURL != "", is.Keys != nil} {
			if set {
				n++
			}
		}
		if n != 1 {
			errs = append(errs, fmt.Errorf("%s: give exactly one of JWKSFile, JWKSURL or Keys (got %d)", where, n))
		}
		if is.JWKSURL != "" {
			if u, err := url.Parse(is.JWKSURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
				errs = append(errs, fmt.Errorf("%s: JWKSURL %q is not an absolute http(s) URL", where, is.JWKSURL))
			}
		}
		if is.Keys != nil {
			if err := checkSet(is.Keys); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", where, err))
			}
		}
		if is.RefreshInterval < 0 {
			errs = append(errs, fmt.Errorf("%s: RefreshInterval must not be negative", where))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidOptions, errors.Join(errs...))
	}
	return nil
}

// Verifier verifies people's bearer tokens against the trusted issuers.
// It is safe for concurrent use. Close it to stop the background refresh
// of URL sources.
type Verifier struct {
	issuers  map[string]*trustedIssuer
	names    []string // trusted iss values, sorted, for messages
	audience string
	clock    clock.Clock
	leeway   time.Duration
	cache    *jwk.Cache // nil without URL sources
	seen     seenTokens
}

// New builds a Verifier and loads every issuer's keys once; a file that
// cannot be read or a URL that cannot be fetched within FetchTimeout is an
// error, so a misconfiguration shows at start, not at the first request.
func New(ctx context.Context, opts Options) (*Verifier, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if opts.Audience == "" {
		opts.Audience = DefaultAudience
	}
	if opts.Clock == nil {
		opts.Clock = clock.Wall{}
	}
	if opts.RefetchGap == 0 {
		opts.RefetchGap = DefaultRefetchGap
	}
	if opts.FetchTimeout == 0 {
		opts.FetchTimeout = DefaultFetchTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	log := opts.Logger.With("component", "authn")
	v := &Verifier{
		issuers:  make(map[string]*trustedIssuer, len(opts.Issuers)),
		audience: opts.Audience,
		clock:    opts.Clock,
		leeway:   opts.Leeway,
	}
	for _, is := range opts.Issuers {
		src, err := v.source(ctx, is, opts, log)
		if err != nil {
			_ = v.Close(context.Background())
			return nil, fmt.Errorf("authn: issuer %q: %w", is.Name, err)
		}
		v.issuers[is.Name] = &trustedIssuer{name: is.Name, src: src, clock: opts.Clock, gap: opts.RefetchGap, log: log}
		v.names = append(v.names, is.Name)
	}
	slices.Sort(v.names)
	return v, nil
}

func (v *Verifier) source(ctx context.Context, is Issuer, opts Options, log *slog.Logger) (keySource, error) {
	switch {
	case is.Keys != nil:
		set, err := is.Keys.Clone()
		if err != nil {
			return nil, err
		}
		return staticSource{set: set}, nil
	case is.JWKSFile != "":
		return newFileSource(is.JWKSFile)
	default:
		if v.cache == nil {
			// The cache's goroutines live until Close, not until ctx ends.
			cache, err := jwk.NewCache(context.WithoutCancel(ctx), httprc.NewClient(
				httprc.WithErrorSink(errsink.NewSlog(log.With("issuer_jwks", "background refresh")))))
			if err != nil {
				return nil, fmt.Errorf("start JWKS cache: %w", err)
			}
			v.cache = cache
		}
		interval := is.RefreshInterval
		if interval == 0 {
			interval = DefaultRefreshInterval
		}
		rctx, cancel := context.WithTimeout(ctx, opts.FetchTimeout)
		defer cancel()
		// Probe once with a plain fetch first: Register waits for its first
		// fetch until the deadline even when the issuer refuses the
		// connection, and an unreachable issuer should fail New at once.
		if _, err := jwk.Fetch(rctx, is.JWKSURL); err != nil {
			return nil, fmt.Errorf("fetch JWKS %s: %w", is.JWKSURL, err)
		}
		if err := v.cache.Register(rctx, is.JWKSURL, jwk.WithConstantInterval(interval), jwk.WithWaitReady(true)); err != nil {
			return nil, fmt.Errorf("fetch JWKS %s: %w", is.JWKSURL, err)
		}
		return &urlSource{cache: v.cache, url: is.JWKSURL, timeout: opts.FetchTimeout}, nil
	}
}

// Close stops the background refresh of URL sources.
func (v *Verifier) Close(ctx context.Context) error {
	if v.cache == nil {
		return nil
	}
	return v.cache.Shutdown(ctx)
}

// Principal is the authenticated person: who they are and what they
// delegated or may approve, as their identity provider says.
type Principal struct {
	ID            string // sub
	Role          string // RoleRep, RoleLead or RoleOperator
	Region        string
	Scopes        []string
	RefundCeiling money.Cents // reps: the most they may refund, per refund
	ApproveLimit  money.Cents // leads: the most they may approve
	Issuer        string      // iss
	Expires       time.Time   // exp
}

// allowedAlgs are the only signature algorithms accepted: asymmetric ones,
// each with the key type it must be verified with. alg none and the HMAC
// family are refused before any key is looked at, which is what defeats the
// classic confusion of HS256 keyed with an issuer's public key bytes.
var allowedAlgs = map[string]jwa.KeyType{
	jwa.EdDSA().String(): jwa.OKP(),
	jwa.ES256().String(): jwa.EC(),
	jwa.RS256().String(): jwa.RSA(),
}

// Verify checks raw, a compact JWS, and returns its person. In order: the
// token parses; alg is EdDSA, ES256 or RS256; iss is a trusted issuer;
// the issuer has a key for kid (refreshing once if not); the signature
// verifies with that key; exp is present and in the future; nbf and iat
// are not in the future; aud contains the audience; and the claims are
// well-typed (integer cents, a known role). Refusals are *Error values
// matching ErrUnauthenticated; a cancelled ctx is returned as itself.
func (v *Verifier) Verify(ctx context.Context, raw string) (Principal, error) {
	if raw == "" {
		return Principal{}, refuse(CodeTokenMissing, "no bearer token: send Authorization: Bearer <token>", nil)
	}
	if len(raw) > MaxTokenBytes {
		return Principal{}, refuse(CodeTokenMalformed, fmt.Sprintf("the token is longer than %d bytes: send the token exactly as the identity provider issued it", MaxTokenBytes), nil)
	}
	now := v.clock.Now()
	if p, ok := v.seen.get(ctx, raw, now); ok {
		return p, nil
	}
	if err := checkHeader(raw); err != nil {
		return Principal{}, err
	}
	f := &keyFinder{v: v}
	payload, err := jws.Verify([]byte(raw),
		jws.WithCompact(),
		jws.WithContext(ctx),
		jws.WithKeyProvider(f),
		jws.WithAlgorithmMatch(true))
	if err != nil {
		return Principal{}, v.signatureError(ctx, f, err)
	}
	p, err := v.claims(f.issuer, payload)
	if err == nil {
		v.seen.put(raw, p, f, now, v.leeway)
	}
	return p, err
}

func (v *Verifier) signatureError(ctx context.Context, f *keyFinder, err error) error {
	var e *Error
	switch {
	case errors.As(err, &e):
		return e
	case ctx.Err() != nil:
		return fmt.Errorf("authn: verify: %w", ctx.Err())
	case f.offered:
		return refuse(CodeBadSignature, fmt.Sprintf(
			"the signature does not verify with key %s of issuer %s: the token was altered or signed by another key; get a new token",
			quote(f.kid), quote(f.issuer.name)), err)
	default:
		return refuse(CodeTokenMalformed, "the token is not a compact JWS (header.payload.signature): send the token exactly as the identity provider issued it", err)
	}
}

func algNotAllowed(alg string) *Error {
	return refuse(CodeAlgNotAllowed, fmt.Sprintf(
		"signature algorithm %s is not accepted; only EdDSA, ES256 and RS256 are (never none or HMAC): get a token signed by a trusted identity provider",
		quote(alg)), nil)
}

// checkHeader refuses, before any key is looked at, a protected header
// that is not unpadded base64url of one unambiguous JSON object, that has
// crit, or whose alg is not allowed. jwx would decode padded or standard
// base64 too, and keep the last of two "kid" members; refusing here means
// the header jwx goes on to read is the one checked.
func checkHeader(raw string) *Error {
	seg, _, ok := strings.Cut(raw, ".")
	if !ok {
		return refuse(CodeTokenMalformed, "the token is not a compact JWS (header.payload.signature): send the token exactly as the identity provider issued it", nil)
	}
	hdr, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return refuse(CodeTokenMalformed, "the token header is not unpadded base64url: send the token exactly as the identity provider issued it", err)
	}
	m, err := strictjson.Object(hdr)
	if err != nil {
		return ambiguous("header", err)
	}
	// RFC 7515 section 4.1.11: crit names extensions the recipient must
	// understand, or refuse the token. This sidecar understands none.
	if _, ok := m["crit"]; ok {
		return refuse(CodeTokenMalformed, "the token header has crit, naming JWS extensions this sidecar does not understand (RFC 7515 section 4.1.11): get a token without crit from the identity provider", nil)
	}
	// jwx refuses to parse an alg it does not know ("None", "XS999"), which
	// would read as a malformed token; name the real reason instead.
	var alg string
	if v, ok := m["alg"]; ok && json.Unmarshal(v, &alg) == nil {
		if _, allowed := allowedAlgs[alg]; !allowed {
			return algNotAllowed(alg)
		}
	}
	return nil
}

// ambiguous is the refusal of a token header or payload that strictjson
// refused: not a JSON object, or a member name that is there twice, or
// twice but for case, at any depth. Readers disagree on which of two
// "role" members counts (Go and jwx keep the last, others the first or
// refuse), so the only safe reading is none.
func ambiguous(part string, err error) *Error {
	var se *strictjson.Error
	if errors.As(err, &se) && errors.Is(err, strictjson.ErrMalformed) && se.Path != "" {
		return refuse(CodeTokenMalformed, fmt.Sprintf(
			"the token %s has member %s twice, or twice but for case: get a token whose %s names each member once, spelled one way",
			part, quote(se.Path), part), err)
	}
	return refuse(CodeTokenMalformed, fmt.Sprintf(
		"the token %s is not a JSON object: send the token exactly as the identity provider issued it", part), err)
}

// keyFinder is the jws.KeyProvider of one Verify call. It refuses on the
// unverified header and iss (refusing on unverified data is safe; only
// acceptance needs a verified signature) and offers exactly one key: the
// trusted issuer's key for kid, with the header's alg.
type keyFinder struct {
	v       *Verifier
	issuer  *trustedIssuer
	kid     string
	key     jwk.Key // the key offered
	offered bool
}

var _ jws.KeyProvider = (*keyFinder)(nil)

func (f *keyFinder) FetchKeys(ctx context.Context, sink jws.KeySink, sig *jws.Signature, msg *jws.Message) error {
	hdr := sig.ProtectedHeaders()
	alg, ok := hdr.Algorithm()
	if !ok {
		return refuse(CodeTokenMalformed, "the token header has no alg: send the token exactly as the identity provider issued it", nil)
	}
	wantKty, ok := allowedAlgs[alg.String()]
	if !ok {
		return algNotAllowed(alg.String())
	}
	var unverified struct {
		Iss string `json:"iss"`
	}
	if err := json.Unmarshal(msg.Payload(), &unverified); err != nil {
		return refuse(CodeTokenMalformed, "the token payload is not a JSON object of claims", err)
	}
	issuer, ok := f.v.issuers[unverified.Iss]
	if !ok {
		return refuse(CodeWrongIssuer, fmt.Sprintf(
			"issuer %s is not trusted by this sidecar: use a token from %s",
			quote(unverified.Iss), strings.Join(f.v.names, " or ")), nil)
	}
	f.issuer = issuer
	kid, _ := hdr.KeyID()
	f.kid = kid
	if kid == "" {
		return refuse(CodeUnknownKid, "the token header names no key (kid): get a token from the identity provider, which names its signing key", nil)
	}
	key, err := issuer.key(ctx, kid)
	if err != nil {
		return err
	}
	if key.KeyType() != wantKty {
		return refuse(CodeBadSignature, fmt.Sprintf("key %s of issuer %s is %s, which cannot verify %s: get a new token",
			quote(kid), quote(issuer.name), key.KeyType(), alg), nil)
	}
	if kalg, ok := key.Algorithm(); ok && kalg.String() != alg.String() {
		return refuse(CodeBadSignature, fmt.Sprintf("key %s of issuer %s is for %s, not %s: get a new token",
			quote(kid), quote(issuer.name), kalg, alg), nil)
	}
	if use, ok := key.KeyUsage(); ok && use != string(jwk.ForSignature) {
		return refuse(CodeBadSignature, fmt.Sprintf("key %s of issuer %s is not a signing key (use %s)", quote(kid), quote(issuer.name), quote(use)), nil)
	}
	sink.Key(alg, key)
	f.offered, f.key = true, key
	return nil
}

// personClaims are the claims read from a verified payload.
type personClaims struct {
	Sub           string
	Role          string
	Region        string
	Scopes        []string
	RefundCeiling int64
	ApproveLimit  int64
}

// decodePersonClaims reads the person's claims by their exact names (Go's
// struct decoding would also take "Role" or "ROLE" for role, a door for a
// user-editable attribute at a lax provider; a lone "ROLE" is not role,
// and "ROLE" beside "role" never gets here). Go's JSON decoder refuses a
// float or a string for an int64, so a ceiling of 500.5, 50000.0, 5e4 or
// "50000" is a bad claim, never a silently rounded number.
func decodePersonClaims(raw strictjson.Members) (personClaims, *Error) {
	var c personClaims
	for _, f := range []struct {
		name string
		dst  any
		want string
	}{
		{"sub", &c.Sub, "a string"},
		{"role", &c.Role, "a string"},
		{"region", &c.Region, "a string"},
		{"scopes", &c.Scopes, "an array of strings"},
		{"refund_ceiling", &c.RefundCeiling, "integer cents"},
		{"approve_limit", &c.ApproveLimit, "integer cents"},
	} {
		v, ok := raw[f.name]
		if !ok {
			continue
		}
		if err := json.Unmarshal(v, f.dst); err != nil {
			return personClaims{}, refuse(CodeBadClaims, fmt.Sprintf(
				"claim %s is %s, want %s: fix the identity provider's claim mapping",
				f.name, quote(string(v)), f.want), nil)
		}
	}
	return c, nil
}

// checkNumericDates refuses an exp, nbf or iat that is not a JSON number
// (RFC 7519 NumericDate) before jwx reads it: jwx also reads "1796000000",
// a string, as a time, and would honour it. The members passed strictjson,
// so a value that starts like a number is one.
func checkNumericDates(raw strictjson.Members) *Error {
	for _, name := range [...]string{"exp", "nbf", "iat"} {
		v, ok := raw[name]
		if !ok || (len(v) > 0 && (v[0] == '-' || v[0] >= '0' && v[0] <= '9')) {
			continue
		}
		return refuse(CodeBadClaims, fmt.Sprintf(
			"claim %s is %s, want a JSON number of seconds since 1970 (not a string): fix the identity provider's claim mapping",
			name, quote(string(v))), nil)
	}
	return nil
}

// claims validates a verified payload and builds the Principal. The
// payload is read strictly here, from the bytes the signature covers.
func (v *Verifier) claims(issuer *trustedIssuer, payload []byte) (Principal, error) {
	raw, err := strictjson.Object(payload)
	if err != nil {
		return Principal{}, ambiguous("payload", err)
	}
	if err := checkNumericDates(raw); err != nil {
		return Principal{}, err
	}
	c, claimErr := decodePersonClaims(raw)
	// The registered claims (exp, nbf, iat, iss, aud) are jwx's to check,
	// before the person's claims: an expired token is "expired", whatever
	// else is wrong with it.
	tok, err := jwt.Parse(payload,
		jwt.WithVerify(false), // the signature was verified above
		jwt.WithClock(v.clock),
		jwt.WithAcceptableSkew(v.leeway),
		jwt.WithRequiredClaim(jwt.ExpirationKey),
		jwt.WithIssuer(issuer.name),
		jwt.WithAudience(v.audience))
	if err != nil {
		return Principal{}, v.validationError(err)
	}
	if claimErr != nil {
		return Principal{}, claimErr
	}
	if err := c.check(); err != nil {
		return Principal{}, err
	}
	exp, _ := tok.Expiration()
	return Principal{
		ID:            c.Sub,
		Role:          c.Role,
		Region:        c.Region,
		Scopes:        c.Scopes,
		RefundCeiling: money.Cents(c.RefundCeiling),
		ApproveLimit:  money.Cents(c.ApproveLimit),
		Issuer:        issuer.name,
		Expires:       exp,
	}, nil
}

func (v *Verifier) validationError(err error) *Error {
	switch {
	case errors.Is(err, jwt.MissingRequiredClaimError()):
		return refuse(CodeExpMissing, "the token has no exp: tokens must expire; configure the identity provider to set exp", err)
	case errors.Is(err, jwt.TokenExpiredError()):
		return refuse(CodeTokenExpired, "the token has expired: get a new one from the identity provider", err)
	case errors.Is(err, jwt.TokenNotYetValidError()), errors.Is(err, jwt.InvalidIssuedAtError()):
		return refuse(CodeNotYetValid, "the token is not valid yet (nbf or iat is in the future): check the clocks of the identity provider and the sidecar", err)
	case errors.Is(err, jwt.InvalidIssuerError()):
		return refuse(CodeWrongIssuer, "the token's issuer does not match the key that signed it: get a new token", err)
	case errors.Is(err, jwt.InvalidAudienceError()):
		return refuse(CodeWrongAudience, fmt.Sprintf("the token is not for %s (aud): request a token whose audience includes %s", quote(v.audience), quote(v.audience)), err)
	default:
		return refuse(CodeBadClaims, "a registered claim (exp, nbf, iat, iss or aud) has the wrong type: fix the identity provider's claim mapping", err)
	}
}

func (c *personClaims) check() error {
	bad := func(format string, args ...any) error {
		return refuse(CodeBadClaims, fmt.Sprintf(format, args...)+": fix the identity provider's claim mapping", nil)
	}
	switch {
	case c.Sub == "":
		return bad("the token has no sub (the person's id)")
	case len(c.Sub) > MaxSubjectBytes:
		return bad("sub is %d bytes, longer than the %d a person's id may have", len(c.Sub), MaxSubjectBytes)
	case strings.ContainsFunc(c.Sub, isControl):
		return bad("sub %s has a control character (or an invisible formatting one): a person's id is printable text", quote(c.Sub))
	case strings.ContainsFunc(c.Sub, unicode.IsSpace):
		return bad("sub %s has white space: a person's id is one word", quote(c.Sub))
	case !isUsername(c.Sub):
		return bad("sub %s is not a username by PRECIS UsernameCaseMapped (RFC 8265), the form every same-person check compares: "+
			"use letters, digits and ASCII punctuation, without symbols, compatibility characters or mixed writing directions", quote(c.Sub))
	case c.Role != RoleRep && c.Role != RoleLead && c.Role != RoleOperator:
		return bad("role %s is not one of rep, lead, operator", quote(c.Role))
	case c.RefundCeiling < 0:
		return bad("refund_ceiling %d is negative", c.RefundCeiling)
	case c.ApproveLimit < 0:
		return bad("approve_limit %d is negative", c.ApproveLimit)
	case slices.Contains(c.Scopes, ""):
		return bad("scopes contains an empty scope")
	}
	return nil
}

// isUsername reports whether sub has a canonical form (identity.Canonical):
// one that does not names nobody whom a same-person check could compare,
// so it is refused here and no check ever meets it. The principal keeps
// the sub as presented.
func isUsername(sub string) bool {
	_, err := identity.Canonical(sub)
	return err == nil
}

// isControl is true of C0 and C1 controls (NUL, newline, ESC ...) and of
// the invisible formatting characters (U+200B, the bidi overrides ...) that
// make one id look like another.
func isControl(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Cf, r)
}

// quote quotes a value that came from a token for a message, cut short so
// a hostile token cannot fill logs.
func quote(s string) string {
	const limit = 64
	if len(s) > limit {
		s = s[:limit] + "..."
	}
	return fmt.Sprintf("%q", s)
}
