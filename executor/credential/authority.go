package credential

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/countersign/countersign/executor/clock"
	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/store"
	"github.com/lestrrat-go/jwx/v3/jwk"
)

// Issuer is the iss claim of every actor token.
const Issuer = "countersign"

// DefaultTTL is the lifetime of an actor token when Options.TTL is zero:
// short, because a request may land until its token expires, and the
// engine concludes that a step's effect is absent only after every token
// minted for it has expired (engine doc, "Effects fenced by time").
const DefaultTTL = 15 * time.Second

// MaxTTL is the longest lifetime the systems of record accept: they refuse
// a token whose exp - iat is over 120 s (401 token_lifetime).
const MaxTTL = 120 * time.Second

// Options configure an Authority.
type Options struct {
	// Dir is the sidecar's data directory; keys live in Dir/keys.
	// Required unless Store is set.
	Dir string

	// Store, when set, keeps the keys in the store instead of Dir/keys:
	// the keyring of a fleet of sidecars sharing one store (see the
	// package doc). KeyEncryptionKey is then required.
	Store *store.DB

	// KeyEncryptionKey seals the keys kept in Store. Only with Store.
	KeyEncryptionKey *KeyEncryptionKey

	// Clock tells the time for iat and exp. Nil means the wall clock.
	Clock clock.Clock

	// TTL is the lifetime of a token (exp - iat), in whole seconds, at
	// most MaxTTL. Default DefaultTTL (15 s). A token minted with
	// Claims.NotAfter may live less.
	TTL time.Duration

	// Logger receives key loads, creations and raises. Default: discard.
	Logger *slog.Logger
}

func (o *Options) validate() error {
	var errs []error
	switch {
	case o.Store == nil && o.Dir == "":
		errs = append(errs, errors.New("option Dir is required (keys are kept under Dir/keys)"))
	case o.Store != nil && o.KeyEncryptionKey == nil:
		errs = append(errs, fmt.Errorf("%w: %w", ErrKeyEncryptionKey, errNoKEK))
	case o.Store == nil && o.KeyEncryptionKey != nil:
		errs = append(errs, errors.New("option KeyEncryptionKey seals keys kept in Store: set Store too, or leave both unset to keep the keys under Dir/keys"))
	}
	if o.TTL < 0 || o.TTL%time.Second != 0 || o.TTL > MaxTTL {
		errs = append(errs, fmt.Errorf("TTL %s must be a positive whole number of seconds (JWT times have one-second resolution), at most %s (the systems of record refuse longer-lived tokens)", o.TTL, MaxTTL))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidOptions, errors.Join(errs...))
	}
	return nil
}

// Authority mints actor tokens with the current epoch's key and publishes
// that key. It is safe for concurrent use; Mint never blocks on Raise.
type Authority struct {
	keys  keyring
	clock clock.Clock
	ttl   int64 // seconds
	log   *slog.Logger

	cur     atomic.Pointer[signer]
	raiseMu sync.Mutex // one Raise at a time in this process
}

// signer is one epoch's key material. It is immutable once built, so Mint
// reads it without a lock and Raise swaps it whole.
type signer struct {
	epoch  int
	kid    string
	key    jwk.Key            // private, carries kid, alg and use
	priv   ed25519.PrivateKey // the same key, raw, for Mint
	header string             // the encoded protected header of every token: alg, kid, typ
	jwks   []byte             // the public JWKS document with only this key
}

// Open loads the current epoch's key, or creates epoch 1 with a fresh
// Ed25519 key when there is none: from opts.Dir/keys, or from opts.Store.
func Open(opts Options) (*Authority, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if opts.Clock == nil {
		opts.Clock = clock.Wall{}
	}
	if opts.TTL == 0 {
		opts.TTL = DefaultTTL
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	log := opts.Logger.With("component", "credential")
	var keys keyring = fileKeys{dir: filepath.Join(opts.Dir, "keys"), log: log}
	if opts.Store != nil {
		keys = storeKeys{db: opts.Store, kek: opts.KeyEncryptionKey, log: log}
	}
	a := &Authority{keys: keys, clock: opts.Clock, ttl: int64(opts.TTL / time.Second), log: log}
	epoch, key, err := keys.load()
	if err != nil {
		return nil, err
	}
	s, err := newSigner(epoch, key)
	if err != nil {
		return nil, err
	}
	a.cur.Store(s)
	a.log.Info("loaded signing key", "epoch", epoch, "kid", s.kid)
	return a, nil
}

func newSigner(epoch int, key jwk.Key) (*signer, error) {
	pub, err := key.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("%w: public key of epoch %d: %w", ErrKeyStore, epoch, err)
	}
	set := jwk.NewSet()
	if err := set.AddKey(pub); err != nil {
		return nil, fmt.Errorf("%w: JWKS of epoch %d: %w", ErrKeyStore, epoch, err)
	}
	doc, err := json.Marshal(set)
	if err != nil {
		return nil, fmt.Errorf("%w: JWKS of epoch %d: %w", ErrKeyStore, epoch, err)
	}
	var priv ed25519.PrivateKey
	if err := jwk.Export(key, &priv); err != nil {
		return nil, fmt.Errorf("%w: key of epoch %d is not Ed25519: %w", ErrKeyStore, epoch, err)
	}
	hdr, err := json.Marshal(map[string]string{"alg": "EdDSA", "kid": kidFor(epoch), "typ": "JWT"})
	if err != nil {
		return nil, err
	}
	return &signer{epoch: epoch, kid: kidFor(epoch), key: key, priv: priv,
		header: base64.RawURLEncoding.EncodeToString(hdr), jwks: doc}, nil
}

// kidFor is the key id of an epoch, which receivers parse back to N.
func kidFor(epoch int) string { return fmt.Sprintf("epoch-%d", epoch) }

// Epoch returns the credential epoch this Authority last minted with or
// noticed; on a shared store another sidecar may have raised it since.
func (a *Authority) Epoch() int { return a.cur.Load().epoch }

// Raise keeps a fresh key for the next epoch, then switches minting and
// the published JWKS to it; every token minted before no longer
// verifies. It returns the new epoch. If keeping the key fails, nothing
// changes. On a shared store the next epoch is the one after the store's
// current epoch, so the raise revokes the tokens of every sidecar.
func (a *Authority) Raise(ctx context.Context) (int, error) {
	a.raiseMu.Lock()
	defer a.raiseMu.Unlock()
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	old := a.cur.Load()
	next, key, err := a.keys.raise(old.epoch)
	if err != nil {
		return 0, err
	}
	s, err := newSigner(next, key)
	if err != nil {
		return 0, err
	}
	a.install(s)
	a.log.Warn("credential epoch raised: tokens of earlier epochs no longer verify",
		"epoch", next, "kid", s.kid, "previous", old.epoch)
	return next, nil
}

// current returns the signer of the current epoch, first reading the
// store's epoch when the keys are shared, so a sidecar never mints with a
// key another sidecar has revoked, nor publishes one.
func (a *Authority) current(ctx context.Context) (*signer, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s := a.cur.Load()
	if read, ok := ctx.Value(epochReadKey{}).(uint64); ok && read == uint64(s.epoch) {
		return s, nil // the caller read it in the store moments ago
	}
	epoch, key, err := a.keys.latest(s.epoch)
	if err != nil || key == nil {
		return s, err
	}
	n, err := newSigner(epoch, key)
	if err != nil {
		return nil, err
	}
	a.log.Warn("credential epoch raised by another sidecar: minting with the new key", "epoch", epoch, "previous", s.epoch)
	return a.install(n), nil
}

type epochReadKey struct{}

// WithEpochRead is ctx carrying the store's current epoch as the caller
// read it (store.Tx.CredentialEpoch) in its own transaction moments before
// the tokens minted under ctx: Mint then reads the epoch again only when it
// is not the one it mints with, which on PostgreSQL saves a read
// transaction per token. The guarantee is the one Mint's own read gives:
// a raise that commits after the read is a raise after the mint. 0 says
// nothing (no key in the store).
func WithEpochRead(ctx context.Context, epoch uint64) context.Context {
	if epoch == 0 {
		return ctx
	}
	return context.WithValue(ctx, epochReadKey{}, epoch)
}

// install makes n current unless a later epoch already is, and returns
// the signer then current: epochs only go up, whichever of a raise and a
// refresh lands first.
func (a *Authority) install(n *signer) *signer {
	for {
		s := a.cur.Load()
		if s.epoch >= n.epoch {
			return s
		}
		if a.cur.CompareAndSwap(s, n) {
			return n
		}
	}
}

// payload is the JSON of an actor token. A struct rather than a jwt.Token
// keeps every claim's JSON type fixed: aud a single string, max and epoch
// integers, act an object.
type payload struct {
	Iss   string      `json:"iss"`
	Sub   string      `json:"sub"`
	Act   actor       `json:"act"`
	Aud   string      `json:"aud"`
	Scope string      `json:"scope"`
	Max   money.Cents `json:"max"`
	Call  string      `json:"call"`
	Key   string      `json:"key,omitempty"`
	Ref   string      `json:"ref,omitempty"`
	Line  string      `json:"line,omitempty"`
	Qty   int64       `json:"quantity,omitempty"`
	JTI   string      `json:"jti"`
	IAT   int64       `json:"iat"`
	Exp   int64       `json:"exp"`
	Epoch int         `json:"epoch"`
}

type actor struct {
	Sub string `json:"sub"`
}

// Mint returns a signed actor token (JWS compact) for one dispatch attempt,
// with the current epoch's key. Every attempt needs its own token: jti is
// fresh each time. Its exp is iat + TTL, or c.NotAfter rounded down to the
// second when that is earlier; a NotAfter that leaves no whole second is
// ErrDeadlinePassed, and nothing is minted.
func (a *Authority) Mint(ctx context.Context, c Claims) (string, error) {
	if err := c.validate(); err != nil {
		return "", err
	}
	iat := a.clock.Now().Unix()
	exp := iat + a.ttl
	if !c.NotAfter.IsZero() {
		if exp = min(exp, c.NotAfter.Unix()); exp <= iat {
			return "", fmt.Errorf("%w: the deadline %s leaves no token life at %s", ErrDeadlinePassed,
				c.NotAfter.UTC().Format(time.RFC3339), time.Unix(iat, 0).UTC().Format(time.RFC3339))
		}
	}
	s, err := a.current(ctx)
	if err != nil {
		return "", err
	}
	body, err := json.Marshal(payload{
		Iss:   Issuer,
		Sub:   c.Subject,
		Act:   actor{Sub: c.Agent},
		Aud:   c.Audience,
		Scope: c.Scope,
		Max:   c.Max,
		Call:  c.Call,
		Key:   c.Key,
		Ref:   c.Reference,
		Line:  c.Line,
		Qty:   c.Quantity,
		JTI:   rand.Text(),
		IAT:   iat,
		Exp:   exp,
		Epoch: s.epoch,
	})
	if err != nil {
		return "", fmt.Errorf("credential: encode claims: %w", err)
	}
	// A compact JWS (RFC 7515) signed with EdDSA (RFC 8037), built here
	// rather than by jws.Sign, which costs several times the signature.
	enc := base64.RawURLEncoding
	tok := make([]byte, 0, len(s.header)+1+enc.EncodedLen(len(body))+1+enc.EncodedLen(ed25519.SignatureSize))
	tok = append(tok, s.header...)
	tok = append(tok, '.')
	tok = enc.AppendEncode(tok, body)
	sig := ed25519.Sign(s.priv, tok)
	tok = append(tok, '.')
	tok = enc.AppendEncode(tok, sig)
	return string(tok), nil
}

func (c Claims) validate() error {
	switch {
	case c.Subject == "":
		return &ClaimError{Claim: "sub", Reason: "is empty: name the representative whose authority is used"}
	case c.Agent == "":
		return &ClaimError{Claim: "act", Reason: "is empty: name the agent acting for the representative"}
	case c.Audience == "":
		return &ClaimError{Claim: "aud", Reason: `is empty: name the one system of record ("ledger" or "orders")`}
	case c.Scope == "":
		return &ClaimError{Claim: "scope", Reason: "is empty: name the one operation the token allows"}
	case c.Call == "":
		return &ClaimError{Claim: "call", Reason: "is empty: bind the token to the call hash of the exact call"}
	case c.Max < 0:
		return &ClaimError{Claim: "max", Reason: fmt.Sprintf("is negative (%d cents)", int64(c.Max))}
	case (c.Line == "") != (c.Quantity == 0) || c.Quantity < 0:
		return &ClaimError{Claim: "quantity", Reason: fmt.Sprintf("%d with line %q: a line-item refund names both, a positive quantity and its line", c.Quantity, c.Line)}
	}
	return nil
}

// JWKS returns the public key set with only the current epoch's key, as
// this Authority last noticed it (it does not read the store: JWKSJSON
// does). The set is the caller's own copy.
func (a *Authority) JWKS() jwk.Set {
	set, err := jwk.Parse(a.cur.Load().jwks)
	if err != nil {
		// The document was produced by json.Marshal of a valid set in
		// newSigner; failing to parse it back is a bug in jwx or here.
		panic(fmt.Sprintf("credential: parse own JWKS: %v", err))
	}
	return set
}

// JWKSJSON returns the JWKS document the sidecar serves at
// /.well-known/jwks.json: {"keys":[{kty OKP, crv Ed25519, kid, alg EdDSA,
// use sig, x}]}.
// On a shared store it first reads the current epoch (and fails rather
// than publish a key the store may have revoked).
func (a *Authority) JWKSJSON() ([]byte, error) {
	s, err := a.current(context.Background())
	if err != nil {
		return nil, err
	}
	return bytes.Clone(s.jwks), nil
}

// JWKSHandler serves JWKSJSON. Receivers re-fetch it often (a raised epoch
// must bite at once), so it is marked not cacheable.
func (a *Authority) JWKSHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusMethodNotAllowed)
			_, _ = w.Write([]byte(`{"error":{"code":"method_not_allowed","message":"use GET to read the JWKS"}}`))
			return
		}
		s, err := a.current(r.Context())
		if err != nil {
			a.log.Error("JWKS not served", "err", err)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":{"code":"not_ready","message":"the signing keys cannot be read from the store; try again"}}`))
			return
		}
		doc := s.jwks
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-cache")
		_, _ = w.Write(doc)
	})
}
