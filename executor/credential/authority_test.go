package credential_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/executor/credential"
	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/simclock"
	"github.com/countersign/countersign/executor/tool"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
	"github.com/lestrrat-go/jwx/v3/jwt"
)

var t0 = time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)

func open(t testing.TB, dir string) *credential.Authority {
	t.Helper()
	a, err := credential.Open(credential.Options{Dir: dir, Clock: simclock.New(t0)})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return a
}

func refundClaims() credential.Claims {
	return credential.Claims{
		Subject:  "rep-ana",
		Agent:    "agent-7",
		Audience: "ledger",
		Scope:    "refund",
		Max:      50000,
		Call:     tool.CallHash(tool.IssueRefund, tool.Args{Order: "O-1001", Amount: 3000}),
	}
}

func mint(t testing.TB, a *credential.Authority, c credential.Claims) string {
	t.Helper()
	tok, err := a.Mint(context.Background(), c)
	if err != nil {
		t.Fatalf("Mint: %v", err)
	}
	return tok
}

// parse verifies tok with jwx against set, as a receiver would.
func parse(tok string, set jwk.Set, now time.Time) (jwt.Token, error) {
	return jwt.ParseString(tok, jwt.WithKeySet(set),
		jwt.WithClock(jwt.ClockFunc(func() time.Time { return now })),
		jwt.WithIssuer("countersign"))
}

// segment decodes part i (0 header, 1 payload) of a compact JWS.
func segment(t *testing.T, tok string, i int) []byte {
	t.Helper()
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("token has %d parts, want 3", len(parts))
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[i])
	if err != nil {
		t.Fatalf("decode part %d: %v", i, err)
	}
	return b
}

func TestMintClaimsRoundTrip(t *testing.T) {
	a := open(t, t.TempDir())
	c := refundClaims()
	tok := mint(t, a, c)

	parsed, err := parse(tok, a.JWKS(), t0.Add(time.Second))
	if err != nil {
		t.Fatalf("token does not verify against the published JWKS: %v", err)
	}
	if aud, _ := parsed.Audience(); len(aud) != 1 || aud[0] != "ledger" {
		t.Errorf("aud = %v, want [ledger]", aud)
	}

	// The exact JSON types matter to receivers in other languages too:
	// decode with UseNumber and check every claim's type and value.
	dec := json.NewDecoder(bytes.NewReader(segment(t, tok, 1)))
	dec.UseNumber()
	var got map[string]any
	if err := dec.Decode(&got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"iss":   "countersign",
		"sub":   "rep-ana",
		"act":   map[string]any{"sub": "agent-7"},
		"aud":   "ledger",
		"scope": "refund",
		"max":   json.Number("50000"),
		"call":  c.Call,
		"iat":   json.Number("1793613600"),
		"exp":   json.Number("1793613615"), // iat + the default TTL, 15 s
		"epoch": json.Number("1"),
	}
	for k, w := range want {
		if g, ok := got[k]; !ok {
			t.Errorf("claim %s missing", k)
		} else if gj, wj := mustJSON(t, g), mustJSON(t, w); gj != wj {
			t.Errorf("claim %s = %s, want %s", k, gj, wj)
		}
	}
	if jti, _ := got["jti"].(string); len(jti) < 20 {
		t.Errorf("jti = %q, want a random string of 128 bits or more", got["jti"])
	}
	if len(got) != len(want)+1 {
		t.Errorf("payload has %d claims, want %d: %v", len(got), len(want)+1, got)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestMintHeader(t *testing.T) {
	a := open(t, t.TempDir())
	var hdr map[string]any
	if err := json.Unmarshal(segment(t, mint(t, a, refundClaims()), 0), &hdr); err != nil {
		t.Fatal(err)
	}
	for k, w := range map[string]string{"alg": "EdDSA", "kid": "epoch-1", "typ": "JWT"} {
		if hdr[k] != w {
			t.Errorf("header %s = %v, want %q", k, hdr[k], w)
		}
	}
}

func TestMaxIsAnIntegerInThePayload(t *testing.T) {
	a := open(t, t.TempDir())
	for _, max := range []int64{0, 1, 50000, 1 << 53, 9007199254740993} {
		c := refundClaims()
		c.Max = money.Cents(max)
		tok := mint(t, a, c)
		raw := segment(t, tok, 1)
		var p struct {
			Max json.RawMessage `json:"max"`
		}
		if err := json.Unmarshal(raw, &p); err != nil {
			t.Fatal(err)
		}
		// Digits only: no decimal point, no exponent, no quotes.
		if want := strings.TrimSpace(mustJSON(t, max)); string(p.Max) != want {
			t.Errorf("max for %d encoded as %s, want %s", max, p.Max, want)
		}
	}
}

func TestExpIsIatPlusTTL(t *testing.T) {
	for _, tc := range []struct {
		name string
		ttl  time.Duration
		want int64
	}{
		{"default", 0, 15},
		{"two minutes", 2 * time.Minute, 120},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := credential.Open(credential.Options{Dir: t.TempDir(), Clock: simclock.New(t0), TTL: tc.ttl})
			if err != nil {
				t.Fatal(err)
			}
			tok := mint(t, a, refundClaims())
			var p struct{ IAT, Exp int64 }
			if err := json.Unmarshal(segment(t, tok, 1), &p); err != nil {
				t.Fatal(err)
			}
			if p.IAT != t0.Unix() || p.Exp-p.IAT != tc.want {
				t.Errorf("iat=%d exp=%d, want iat=%d and exp-iat=%d", p.IAT, p.Exp, t0.Unix(), tc.want)
			}
			set := a.JWKS()
			if _, err := parse(tok, set, t0.Add(time.Duration(tc.want-1)*time.Second)); err != nil {
				t.Errorf("one second before exp: %v", err)
			}
			if _, err := parse(tok, set, t0.Add(time.Duration(tc.want)*time.Second)); !errors.Is(err, jwt.TokenExpiredError()) {
				t.Errorf("at exp: err = %v, want expired", err)
			}
		})
	}
}

func TestMintRefusesMissingClaims(t *testing.T) {
	a := open(t, t.TempDir())
	for _, tc := range []struct {
		claim string
		edit  func(*credential.Claims)
	}{
		{"sub", func(c *credential.Claims) { c.Subject = "" }},
		{"act", func(c *credential.Claims) { c.Agent = "" }},
		{"aud", func(c *credential.Claims) { c.Audience = "" }},
		{"scope", func(c *credential.Claims) { c.Scope = "" }},
		{"call", func(c *credential.Claims) { c.Call = "" }},
		{"max", func(c *credential.Claims) { c.Max = -1 }},
	} {
		t.Run(tc.claim, func(t *testing.T) {
			c := refundClaims()
			tc.edit(&c)
			tok, err := a.Mint(context.Background(), c)
			if tok != "" || !errors.Is(err, credential.ErrInvalidClaims) {
				t.Fatalf("Mint = %q, %v; want ErrInvalidClaims", tok, err)
			}
			var ce *credential.ClaimError
			if !errors.As(err, &ce) || ce.Claim != tc.claim {
				t.Errorf("error %v does not name claim %q", err, tc.claim)
			}
		})
	}
}

func TestMintUniqueJTI(t *testing.T) {
	a := open(t, t.TempDir())
	seen := map[string]bool{}
	for range 100 {
		var p struct{ JTI string }
		tok := mint(t, a, refundClaims())
		if err := json.Unmarshal(segment(t, tok, 1), &p); err != nil {
			t.Fatal(err)
		}
		if seen[p.JTI] {
			t.Fatalf("jti %q repeated", p.JTI)
		}
		seen[p.JTI] = true
	}
}

func TestJWKSPublishesOnlyThePublicKey(t *testing.T) {
	a := open(t, t.TempDir())
	doc, err := a.JWKSJSON()
	if err != nil {
		t.Fatal(err)
	}
	var set struct{ Keys []map[string]any }
	if err := json.Unmarshal(doc, &set); err != nil {
		t.Fatal(err)
	}
	if len(set.Keys) != 1 {
		t.Fatalf("JWKS has %d keys, want 1: %s", len(set.Keys), doc)
	}
	k := set.Keys[0]
	for name, want := range map[string]string{"kty": "OKP", "crv": "Ed25519", "kid": "epoch-1", "alg": "EdDSA", "use": "sig"} {
		if k[name] != want {
			t.Errorf("%s = %v, want %q", name, k[name], want)
		}
	}
	if _, ok := k["d"]; ok {
		t.Fatalf("JWKS publishes the private key: %s", doc)
	}

	rec := httptest.NewRecorder()
	a.JWKSHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/.well-known/jwks.json", nil))
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" || !bytes.Equal(rec.Body.Bytes(), doc) {
		t.Errorf("handler: %d %q %s", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
	}
	rec = httptest.NewRecorder()
	a.JWKSHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/.well-known/jwks.json", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST: status %d, want 405", rec.Code)
	}
}

func TestRaiseRevokesEarlierTokens(t *testing.T) {
	a := open(t, t.TempDir())
	old := mint(t, a, refundClaims())
	oldSet := a.JWKS()

	epoch, err := a.Raise(context.Background())
	if err != nil || epoch != 2 || a.Epoch() != 2 {
		t.Fatalf("Raise = %d, %v; Epoch() = %d; want 2", epoch, err, a.Epoch())
	}
	newSet := a.JWKS()
	if newSet.Len() != 1 {
		t.Fatalf("JWKS after raise has %d keys, want only the new one", newSet.Len())
	}
	if k, _ := newSet.Key(0); kidOf(k) != "epoch-2" {
		t.Fatalf("published kid %q, want epoch-2", kidOf(k))
	}
	now := t0.Add(time.Second)
	if _, err := parse(old, newSet, now); err == nil {
		t.Fatal("a token of epoch 1 still verifies against the JWKS of epoch 2")
	}
	if _, err := parse(old, oldSet, now); err != nil {
		t.Fatalf("sanity: old token against old set: %v", err)
	}
	fresh := mint(t, a, refundClaims())
	if _, err := parse(fresh, newSet, now); err != nil {
		t.Fatalf("new token against new set: %v", err)
	}
	var hdr struct{ Kid string }
	var p struct{ Epoch int }
	_ = json.Unmarshal(segment(t, fresh, 0), &hdr)
	_ = json.Unmarshal(segment(t, fresh, 1), &p)
	if hdr.Kid != "epoch-2" || p.Epoch != 2 {
		t.Errorf("kid %q epoch %d, want epoch-2 and 2", hdr.Kid, p.Epoch)
	}
}

func kidOf(k jwk.Key) string {
	kid, _ := k.KeyID()
	return kid
}

func TestKeysPersistAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	a := open(t, dir)
	if _, err := a.Raise(context.Background()); err != nil {
		t.Fatal(err)
	}
	tok := mint(t, a, refundClaims())

	keys := filepath.Join(dir, "keys")
	assertMode(t, keys, 0o700)
	entries, err := os.ReadDir(keys)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
		assertMode(t, filepath.Join(keys, e.Name()), 0o600)
	}
	if len(names) != 1 || names[0] != "epoch-2.json" {
		t.Errorf("key files %v, want only epoch-2.json (revoked keys removed)", names)
	}

	b := open(t, dir)
	if b.Epoch() != 2 {
		t.Fatalf("reopened at epoch %d, want 2", b.Epoch())
	}
	if _, err := parse(tok, b.JWKS(), t0); err != nil {
		t.Fatalf("token minted before restart does not verify after: %v", err)
	}
	if _, err := parse(mint(t, b, refundClaims()), a.JWKS(), t0); err != nil {
		t.Fatalf("token minted after restart does not verify against the earlier JWKS: %v", err)
	}
}

func assertMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != want {
		t.Errorf("%s mode %v, want %v", path, got, want)
	}
}

func TestOpenTightensAndCleans(t *testing.T) {
	dir := t.TempDir()
	open(t, dir)
	keys := filepath.Join(dir, "keys")
	key := filepath.Join(keys, "epoch-1.json")
	stray := filepath.Join(keys, ".tmp-epoch-2.json-123")
	if err := os.WriteFile(stray, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(key, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(keys, 0o755); err != nil {
		t.Fatal(err)
	}
	if a := open(t, dir); a.Epoch() != 1 {
		t.Fatalf("epoch %d, want 1", a.Epoch())
	}
	assertMode(t, keys, 0o700)
	assertMode(t, key, 0o600)
	if _, err := os.Stat(stray); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temporary file left by a crash was not removed: %v", err)
	}
}

func TestOpenRefusesBadKeyFiles(t *testing.T) {
	for _, tc := range []struct {
		name string
		data string
	}{
		{"not json", "{"},
		{"symmetric key", `{"kty":"oct","k":"c2VjcmV0","kid":"epoch-3","alg":"EdDSA"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			open(t, dir)
			if err := os.WriteFile(filepath.Join(dir, "keys", "epoch-3.json"), []byte(tc.data), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := credential.Open(credential.Options{Dir: dir})
			if !errors.Is(err, credential.ErrKeyStore) {
				t.Fatalf("Open = %v, want ErrKeyStore (never a silent fresh key)", err)
			}
		})
	}
	t.Run("public key of the right epoch", func(t *testing.T) {
		dir := t.TempDir()
		a := open(t, dir)
		doc, _ := a.JWKSJSON()
		var set struct{ Keys []json.RawMessage }
		_ = json.Unmarshal(doc, &set)
		pub := bytes.Replace(set.Keys[0], []byte("epoch-1"), []byte("epoch-2"), 1)
		if err := os.WriteFile(filepath.Join(dir, "keys", "epoch-2.json"), pub, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := credential.Open(credential.Options{Dir: dir}); !errors.Is(err, credential.ErrKeyStore) {
			t.Fatalf("Open = %v, want ErrKeyStore", err)
		}
	})
}

func TestRaiseRefusesExistingEpochFile(t *testing.T) {
	dir := t.TempDir()
	a := open(t, dir)
	if err := os.WriteFile(filepath.Join(dir, "keys", "epoch-2.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Raise(context.Background()); !errors.Is(err, credential.ErrEpochConflict) {
		t.Fatalf("Raise = %v, want ErrEpochConflict", err)
	}
	if a.Epoch() != 1 {
		t.Errorf("epoch %d after a failed raise, want 1 (unchanged)", a.Epoch())
	}
}

func TestOpenOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts credential.Options
	}{
		{"no dir", credential.Options{}},
		{"negative ttl", credential.Options{Dir: t.TempDir(), TTL: -time.Second}},
		{"fractional ttl", credential.Options{Dir: t.TempDir(), TTL: 1500 * time.Millisecond}},
		{"ttl over what receivers accept", credential.Options{Dir: t.TempDir(), TTL: credential.MaxTTL + time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := credential.Open(tc.opts); !errors.Is(err, credential.ErrInvalidOptions) {
				t.Fatalf("Open = %v, want ErrInvalidOptions", err)
			}
		})
	}
}

// TestConcurrentMintAndRaise mints from many goroutines while the epoch is
// raised repeatedly (run with -race). Every token must carry a kid and an
// epoch claim that agree, and verify against that epoch's published key.
func TestConcurrentMintAndRaise(t *testing.T) {
	a := open(t, t.TempDir())
	const raises, minters, perMinter = 5, 8, 40

	var mu sync.Mutex
	sets := map[string]jwk.Set{"epoch-1": a.JWKS()}
	var tokens []string

	var wg sync.WaitGroup
	for range minters {
		wg.Go(func() {
			for range perMinter {
				tok, err := a.Mint(context.Background(), refundClaims())
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				tokens = append(tokens, tok)
				mu.Unlock()
			}
		})
	}
	wg.Go(func() {
		for range raises {
			if _, err := a.Raise(context.Background()); err != nil {
				t.Error(err)
				return
			}
			set := a.JWKS()
			k, _ := set.Key(0)
			mu.Lock()
			sets[kidOf(k)] = set
			mu.Unlock()
		}
	})
	wg.Wait()

	if a.Epoch() != 1+raises {
		t.Fatalf("epoch %d, want %d", a.Epoch(), 1+raises)
	}
	for _, tok := range tokens {
		msg, err := jws.ParseString(tok)
		if err != nil {
			t.Fatal(err)
		}
		kid, _ := msg.Signatures()[0].ProtectedHeaders().KeyID()
		var p struct{ Epoch int }
		if err := json.Unmarshal(msg.Payload(), &p); err != nil {
			t.Fatal(err)
		}
		if kid != "epoch-"+itoa(p.Epoch) {
			t.Fatalf("kid %q but epoch claim %d", kid, p.Epoch)
		}
		if _, err := jws.Verify([]byte(tok), jws.WithKeySet(sets[kid])); err != nil {
			t.Fatalf("token of %s does not verify against that epoch's key: %v", kid, err)
		}
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// A token names the one ledger write (key) or reshipment (ref) it is for,
// and omits the claim when the call has none.
func TestMintKeyAndReference(t *testing.T) {
	a := open(t, t.TempDir())
	for _, tc := range []struct {
		name     string
		key, ref string
	}{
		{"a refund names its idempotency key", "cs-0123", ""},
		{"a reship names its reference", "", "cs-4567"},
		{"a lookup names neither", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := refundClaims()
			c.Key, c.Reference = tc.key, tc.ref
			var got map[string]any
			if err := json.Unmarshal(segment(t, mint(t, a, c), 1), &got); err != nil {
				t.Fatal(err)
			}
			for claim, want := range map[string]string{"key": tc.key, "ref": tc.ref} {
				v, present := got[claim]
				if present != (want != "") || (present && v != want) {
					t.Errorf("claim %s = %v (present %v), want %q", claim, v, present, want)
				}
			}
		})
	}
}

// TestNotAfterBoundsExp: a token minted with NotAfter (the step's token
// deadline) expires at it, rounded down to the second, when that comes
// before iat + TTL; one whose deadline leaves no whole second is not
// minted at all.
func TestNotAfterBoundsExp(t *testing.T) {
	a, err := credential.Open(credential.Options{Dir: t.TempDir(), Clock: simclock.New(t0), TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		notAfter time.Time
		exp      int64 // 0: refused
	}{
		{"none: iat + TTL", time.Time{}, t0.Unix() + 60},
		{"later than iat + TTL: iat + TTL", t0.Add(time.Hour), t0.Unix() + 60},
		{"earlier: the deadline", t0.Add(10 * time.Second), t0.Unix() + 10},
		{"a fraction of a second: rounded down", t0.Add(2500 * time.Millisecond), t0.Unix() + 2},
		{"less than a second away: refused", t0.Add(900 * time.Millisecond), 0},
		{"passed: refused", t0.Add(-time.Second), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := refundClaims()
			c.NotAfter = tc.notAfter
			tok, err := a.Mint(context.Background(), c)
			if tc.exp == 0 {
				if !errors.Is(err, credential.ErrDeadlinePassed) {
					t.Fatalf("Mint = %q, %v; want ErrDeadlinePassed", tok, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var p struct{ IAT, Exp int64 }
			if err := json.Unmarshal(segment(t, tok, 1), &p); err != nil {
				t.Fatal(err)
			}
			if p.Exp != tc.exp {
				t.Errorf("exp = %d, want %d", p.Exp, tc.exp)
			}
		})
	}
}
