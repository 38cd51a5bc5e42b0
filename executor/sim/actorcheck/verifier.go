package actorcheck

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"

	"github.com/countersign/countersign/executor/clock"
)

// Issuer is the iss of every actor token.
const Issuer = "countersign"

// Defaults of [Options].
const (
	// DefaultMaxAge is the JWKS cache age the sim command uses unless told
	// otherwise. Options.MaxAge itself has no default: its zero value
	// means "fetch on every request", the strictest setting.
	DefaultMaxAge = time.Second
	// DefaultMinRefreshInterval spaces refreshes caused by unknown kids
	// after one that did not find the kid.
	DefaultMinRefreshInterval = time.Second
	// DefaultFetchTimeout bounds one JWKS fetch when Options.HTTPClient is
	// nil.
	DefaultFetchTimeout = 5 * time.Second
)

// Lifetime policy. An actor token is minted for one attempt and lives
// seconds (15 s by default, at most 120 s); a token that claims to live
// longer, or to have been issued later than now, was not minted by a
// minter keeping that policy.
const (
	// MaxLifetime bounds exp - iat.
	MaxLifetime = 120 * time.Second
	// MaxClockSkew is how far in the future iat may be, for clocks that
	// disagree a little.
	MaxClockSkew = 5 * time.Second
)

// maxTokenBytes bounds the Authorization header's token; an actor token is
// well under 1 KiB.
const maxTokenBytes = 8 << 10

// Options configure a [Verifier].
type Options struct {
	// JWKSURL is the sidecar's published key set,
	// http://host:port/.well-known/jwks.json. Required unless Keys is set.
	JWKSURL string
	// Keys is a fixed key set used instead of fetching JWKSURL (tests).
	Keys jwk.Set
	// MaxAge is how long a fetched JWKS is used before it is fetched again.
	// Zero fetches it for every request (concurrent requests share one
	// fetch that began after they arrived). The sim command defaults to
	// DefaultMaxAge.
	MaxAge time.Duration
	// MinRefreshInterval rate-limits refreshes triggered by an unknown kid,
	// after one that did not find it. Zero means DefaultMinRefreshInterval.
	MinRefreshInterval time.Duration
	// Clock is the time that exp is compared with. Nil means the wall
	// clock. The JWKS cache always runs on the real clock: it is about the
	// network, not about the token.
	Clock clock.Clock
	// HTTPClient fetches the JWKS. Nil means a client with
	// DefaultFetchTimeout.
	HTTPClient *http.Client
	// Replays remembers the jti of every accepted token until its exp, so
	// that a token captured in flight cannot be used a second time. Nil
	// means a set in memory, which a restart forgets; the simulators pass
	// one kept in their bbolt file.
	Replays Replays
	// AllowReplay turns the single-use check off: a token is accepted as
	// often as it is presented until it expires. It exists ONLY for the
	// tests that remove that control; nothing reachable from configuration
	// sets it.
	AllowReplay bool
}

// Verifier checks actor tokens. It is safe for concurrent use.
type Verifier struct {
	o        Options
	client   *http.Client
	static   *keyring
	fetching chan struct{} // a one-slot semaphore: one JWKS fetch at a time

	mu       sync.Mutex
	ring     *keyring
	lastMiss time.Time
}

// New returns a Verifier for o.
func New(o Options) (*Verifier, error) {
	v := &Verifier{o: o, client: o.HTTPClient, fetching: make(chan struct{}, 1)}
	switch {
	case o.Keys != nil:
		r, err := newKeyring(o.Keys)
		if err != nil {
			return nil, fmt.Errorf("actorcheck: Options.Keys: %w", err)
		}
		v.static = r
	case o.JWKSURL == "":
		return nil, errors.New("actorcheck: Options.JWKSURL is required (the sidecar's /.well-known/jwks.json)")
	}
	if o.MaxAge < 0 {
		return nil, fmt.Errorf("actorcheck: Options.MaxAge %v is negative; use 0 to fetch on every request", o.MaxAge)
	}
	if v.o.MinRefreshInterval == 0 {
		v.o.MinRefreshInterval = DefaultMinRefreshInterval
	}
	if v.o.Clock == nil {
		v.o.Clock = clock.Wall{}
	}
	if v.client == nil {
		v.client = &http.Client{Timeout: DefaultFetchTimeout}
	}
	if v.o.Replays == nil {
		v.o.Replays = &memoryReplays{}
	}
	return v, nil
}

// Claims are the verified claims of an actor token.
type Claims struct {
	Subject   string   // sub: the rep whose delegation is used
	Agent     string   // act.sub: the agent acting for them
	Audience  []string // aud: one system of record
	Scope     string   // one operation
	Max       int64    // the rep's refund ceiling in cents (HasMax says whether present)
	HasMax    bool
	Call      string // the binding of the one call the token was minted for
	Key       string // key: the Idempotency-Key of a ledger write ("" when none)
	Reference string // ref: the reference of a reshipment ("" when none)
	Line      string // line: a line-item refund's line ("" when none)
	Quantity  int64  // quantity: a line-item refund's units (0 when none)
	Epoch     int
	ID        string // jti
	IssuedAt  time.Time
	Expiry    time.Time
}

// Unexpired refuses the token (401 token_expired) when it has expired by
// now. [Verifier.Authenticate] checks exp when the request arrives; a
// receiver checks it again at the moment it commits what the request asks
// (see "Expiry at commit" in the package doc), so a request held up on
// the way, in a queue or a slow transaction, acts only while its token
// still stands.
func (c Claims) Unexpired(now time.Time) error {
	if !now.Before(c.Expiry) {
		return unauthorized(CodeTokenExpired, fmt.Sprintf("the token expired at %s, before the request could be committed",
			c.Expiry.UTC().Format(time.RFC3339)))
	}
	return nil
}

// Want is what one request needs from a token: this system, this operation,
// the binding recomputed from this request, the request's idempotency key
// and reference (each "" when the request has none) and, for refunds, the
// amount.
type Want struct {
	Audience  string
	Scope     string
	Call      string
	Key       string // the Idempotency-Key header
	Reference string // the reference in the body of a reshipment
	Amount    int64  // compared with max when > 0
	Line      string // a line-item refund's line ("" for any other request)
	Quantity  int64  // and its quantity
}

// Check runs [Verifier.Verify] and then [Claims.Authorize].
func (v *Verifier) Check(ctx context.Context, authorization string, w Want) (Claims, error) {
	c, err := v.Verify(ctx, authorization)
	if err != nil {
		return Claims{}, err
	}
	if err := c.Authorize(w); err != nil {
		return Claims{}, err
	}
	return c, nil
}

type header struct {
	Alg string `json:"alg"`
	Kid string `json:"kid"`
}

type payload struct {
	Iss   string          `json:"iss"`
	Sub   string          `json:"sub"`
	Act   *actor          `json:"act"`
	Aud   json.RawMessage `json:"aud"`
	Scope string          `json:"scope"`
	Max   *int64          `json:"max"`
	Call  string          `json:"call"`
	Key   string          `json:"key"`
	Ref   string          `json:"ref"`
	Line  string          `json:"line"`
	Qty   int64           `json:"quantity"`
	Jti   string          `json:"jti"`
	Iat   *float64        `json:"iat"`
	Exp   *float64        `json:"exp"`
	Epoch *int64          `json:"epoch"`
}

type actor struct {
	Sub string `json:"sub"`
}

// Verify authenticates the token in an Authorization header value: the 401
// group of checks, in the documented order, recording the jti in
// Options.Replays. It returns the verified claims or a *Refusal; any other
// error wraps ErrKeysUnavailable.
func (v *Verifier) Verify(ctx context.Context, authorization string) (Claims, error) {
	c, err := v.Authenticate(ctx, authorization)
	if err != nil {
		return Claims{}, err
	}
	// Last of the group: only a token accepted in every other respect uses
	// up its jti.
	if err := v.once(c.ID, c.Expiry, v.o.Clock.Now()); err != nil {
		return Claims{}, err
	}
	return c, nil
}

// Authenticate runs the 401 group of [Verifier.Verify] except the record of
// the jti, for a receiver that records it itself in the transaction that
// acts on the request (see "Single use" in the package doc): the claims
// are accepted only once the caller has recorded Claims.ID with [Replayed]
// as the answer if it was recorded before. With the single-use check on,
// a token without a jti is still refused here.
func (v *Verifier) Authenticate(ctx context.Context, authorization string) (Claims, error) {
	arrival := time.Now()
	raw, ok := bearer(authorization)
	if !ok {
		return Claims{}, unauthorized(CodeTokenMissing, `send the actor token as "Authorization: Bearer <token>"`)
	}
	h, p, err := split(raw)
	if err != nil {
		return Claims{}, unauthorized(CodeTokenMalformed, err.Error())
	}
	if h.Alg != jwa.EdDSA().String() {
		return Claims{}, unauthorized(CodeAlgNotAllowed, fmt.Sprintf("alg %q is not accepted; actor tokens are signed with EdDSA", h.Alg))
	}
	if p.Iss != Issuer || p.Act == nil || p.Act.Sub == "" {
		return Claims{}, unauthorized(CodeNotActorToken, "not an actor token (iss countersign with an act claim); a person's token cannot be used here")
	}
	n, ok := epochOf(h.Kid)
	if !ok {
		return Claims{}, unauthorized(CodeUnknownKid, fmt.Sprintf("kid %q does not name a credential epoch", h.Kid))
	}
	ring, err := v.keys(ctx, arrival)
	if err != nil {
		return Claims{}, err
	}
	key, ok := ring.keys[h.Kid]
	if !ok && n >= ring.current {
		if ring, err = v.refreshFor(ctx, h.Kid, ring); err != nil {
			return Claims{}, err
		}
		key, ok = ring.keys[h.Kid]
	}
	if n < ring.current {
		return Claims{}, unauthorized(CodeEpochRevoked, fmt.Sprintf("credential epoch %d was revoked; the current epoch is %d", n, ring.current))
	}
	if !ok {
		return Claims{}, unauthorized(CodeUnknownKid, fmt.Sprintf("kid %q is not in the sidecar's JWKS", h.Kid))
	}
	if _, err := jws.VerifyCompactFast(key, []byte(raw), jwa.EdDSA()); err != nil {
		return Claims{}, unauthorized(CodeBadSignature, fmt.Sprintf("the signature does not verify with the key %q", h.Kid))
	}
	now := v.o.Clock.Now()
	iat, exp, err := lifetime(p, now)
	if err != nil {
		return Claims{}, err
	}
	if p.Epoch == nil || *p.Epoch != int64(n) {
		return Claims{}, unauthorized(CodeTokenMalformed, fmt.Sprintf("the epoch claim does not match kid %q", h.Kid))
	}
	aud, err := audience(p.Aud)
	if err != nil {
		return Claims{}, unauthorized(CodeTokenMalformed, err.Error())
	}
	if p.Jti == "" && !v.o.AllowReplay {
		return Claims{}, unauthorized(CodeTokenMalformed, "the token has no jti; actor tokens are single-use and need one")
	}
	c := Claims{
		Subject: p.Sub, Agent: p.Act.Sub, Audience: aud, Scope: p.Scope, Call: p.Call,
		Key: p.Key, Reference: p.Ref, Line: p.Line, Quantity: p.Qty, Epoch: n, ID: p.Jti, IssuedAt: iat, Expiry: exp,
	}
	if p.Max != nil {
		c.Max, c.HasMax = *p.Max, true
	}
	return c, nil
}

// lifetime checks exp and iat against now and the lifetime policy.
func lifetime(p payload, now time.Time) (iat, exp time.Time, err error) {
	if p.Exp == nil {
		return iat, exp, unauthorized(CodeExpMissing, "the token has no exp claim")
	}
	exp = numericDate(*p.Exp)
	if !now.Before(exp) {
		return iat, exp, unauthorized(CodeTokenExpired, fmt.Sprintf("the token expired at %s", exp.UTC().Format(time.RFC3339)))
	}
	if p.Iat == nil {
		return iat, exp, unauthorized(CodeTokenLifetime, "the token has no iat claim, so its lifetime cannot be bounded")
	}
	iat = numericDate(*p.Iat)
	if exp.Sub(iat) > MaxLifetime {
		return iat, exp, unauthorized(CodeTokenLifetime, fmt.Sprintf("the token lives %s from iat to exp; actor tokens may live at most %s", exp.Sub(iat), MaxLifetime))
	}
	if iat.After(now.Add(MaxClockSkew)) {
		return iat, exp, unauthorized(CodeTokenLifetime, fmt.Sprintf("the token was issued in the future (iat %s); check the minter's clock", iat.UTC().Format(time.RFC3339)))
	}
	return iat, exp, nil
}

// once records jti as used until exp, refusing a jti already recorded.
func (v *Verifier) once(jti string, exp, now time.Time) error {
	if v.o.AllowReplay {
		return nil
	}
	replayed, err := v.o.Replays.Use(jti, exp, now)
	if err != nil {
		return fmt.Errorf("actorcheck: recording the jti: %w", err)
	}
	if replayed {
		return Replayed()
	}
	return nil
}

// Replayed is the refusal of a token whose jti was already recorded: 401
// token_replayed. A receiver that records jtis itself (after
// [Verifier.Authenticate]) answers it.
func Replayed() *Refusal {
	return unauthorized(CodeTokenReplayed, "this token was already used; every request needs a freshly minted token")
}

// Authorize checks that verified claims cover one request: the 403 group of
// checks, in the documented order.
func (c Claims) Authorize(w Want) error {
	if len(c.Audience) != 1 || c.Audience[0] != w.Audience {
		return forbidden(CodeWrongAudience, fmt.Sprintf("the token is for %s, not for %q", strings.Join(c.Audience, ","), w.Audience))
	}
	if c.Scope != w.Scope {
		return forbidden(CodeWrongScope, fmt.Sprintf("the token's scope is %q; this operation needs %q", c.Scope, w.Scope))
	}
	if c.Call != w.Call {
		return forbidden(CodeCallMismatch, "the token was minted for a different call (tool, order or amount)")
	}
	if c.Key != w.Key {
		return forbidden(CodeKeyMismatch, fmt.Sprintf("the token was minted for Idempotency-Key %q, not %q; mint a token for this key", c.Key, w.Key))
	}
	if c.Reference != w.Reference {
		return forbidden(CodeRefMismatch, fmt.Sprintf("the token was minted for reference %q, not %q; mint a token for this reference", c.Reference, w.Reference))
	}
	if c.Line != w.Line || c.Quantity != w.Quantity {
		return forbidden(CodeLineMismatch, fmt.Sprintf("the token was minted for %d of line %q, not %d of line %q; mint a token for this line", c.Quantity, c.Line, w.Quantity, w.Line))
	}
	if w.Amount > 0 && (!c.HasMax || w.Amount > c.Max) {
		return forbidden(CodeAmountAboveMax, fmt.Sprintf("amount %d is above the delegated maximum %d (cents)", w.Amount, c.Max))
	}
	return nil
}

// bearer extracts the token from "Bearer <token>" (scheme case-insensitive).
func bearer(authorization string) (string, bool) {
	scheme, tok, ok := strings.Cut(authorization, " ")
	tok = strings.TrimSpace(tok)
	if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
		return "", false
	}
	return tok, true
}

// split decodes the unverified header and payload of a compact JWS.
func split(raw string) (header, payload, error) {
	var h header
	var p payload
	if len(raw) > maxTokenBytes {
		return h, p, fmt.Errorf("token longer than %d bytes", maxTokenBytes)
	}
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return h, p, errors.New("not a compact JWS (header.payload.signature)")
	}
	if err := decodeSegment(parts[0], &h); err != nil {
		return h, p, fmt.Errorf("header: %w", err)
	}
	if err := decodeSegment(parts[1], &p); err != nil {
		return h, p, fmt.Errorf("payload: %w", err)
	}
	return h, p, nil
}

func decodeSegment(seg string, dst any) error {
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return errors.New("not base64url")
	}
	if b = bytes.TrimSpace(b); len(b) == 0 || b[0] != '{' {
		return errors.New("not a JSON object")
	}
	if err := json.Unmarshal(b, dst); err != nil {
		return errors.New("not a JSON object of the expected shape")
	}
	return nil
}

// audience accepts aud as a string or an array of strings (RFC 7519).
func audience(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, errors.New("aud is neither a string nor an array of strings")
	}
	return many, nil
}

// numericDate converts JWT seconds since the epoch, possibly fractional.
// Values beyond year 9999 either way are clamped: they compare the same.
func numericDate(sec float64) time.Time {
	const limit = 253402300799 // 9999-12-31T23:59:59Z
	sec = max(-limit, min(limit, sec))
	whole, frac := math.Modf(sec)
	return time.Unix(int64(whole), int64(frac*1e9))
}
