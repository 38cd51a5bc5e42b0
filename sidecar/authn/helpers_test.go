package authn_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"testing"
	"time"

	"github.com/countersign/countersign/executor/simclock"
	"github.com/countersign/countersign/sidecar/authn"
	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
)

var t0 = time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)

const corpIssuer = "https://idp.quillfeather.example"

// signer is a test key pair: priv signs, pub goes into a trusted JWKS.
type signer struct {
	alg  jwa.SignatureAlgorithm
	priv jwk.Key
	pub  jwk.Key
}

func newSigner(t testing.TB, alg jwa.SignatureAlgorithm, kid string) signer {
	t.Helper()
	var raw any
	var err error
	switch alg {
	case jwa.EdDSA():
		_, raw, err = ed25519.GenerateKey(rand.Reader)
	case jwa.ES256():
		raw, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case jwa.RS256():
		raw, err = rsa.GenerateKey(rand.Reader, 2048)
	default:
		t.Fatalf("no test key for %s", alg)
	}
	if err != nil {
		t.Fatal(err)
	}
	priv, err := jwk.Import(raw)
	if err != nil {
		t.Fatal(err)
	}
	must(t, priv.Set(jwk.KeyIDKey, kid))
	must(t, priv.Set(jwk.AlgorithmKey, alg))
	pub, err := priv.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	return signer{alg: alg, priv: priv, pub: pub}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func setOf(t testing.TB, keys ...jwk.Key) jwk.Set {
	t.Helper()
	set := jwk.NewSet()
	for _, k := range keys {
		must(t, set.AddKey(k))
	}
	return set
}

// claims returns valid claims of rep-ana from corpIssuer; edit to break one.
func claims() map[string]any {
	return map[string]any{
		"iss":            corpIssuer,
		"sub":            "rep-ana",
		"aud":            "countersign",
		"role":           "rep",
		"region":         "EU",
		"scopes":         []string{"lookup", "refund", "reship"},
		"refund_ceiling": 50000,
		"iat":            t0.Unix(),
		"exp":            t0.Add(time.Hour).Unix(),
		"jti":            "j1",
	}
}

func (s signer) sign(t testing.TB, c map[string]any) string {
	t.Helper()
	body, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return s.signRaw(t, body)
}

func (s signer) signRaw(t testing.TB, body []byte) string {
	t.Helper()
	tok, err := jws.Sign(body, jws.WithKey(s.alg, s.priv))
	if err != nil {
		t.Fatal(err)
	}
	return string(tok)
}

// signBytes signs a compact JWS whose header and payload are exactly the
// given bytes (jwx writes its own header), for tokens whose JSON another
// library would never produce: duplicate names, crit, a string exp. EdDSA only.
func (s signer) signBytes(t testing.TB, hdr, payload []byte) string {
	t.Helper()
	if s.alg != jwa.EdDSA() {
		t.Fatalf("signBytes needs an EdDSA signer, not %s", s.alg)
	}
	var priv ed25519.PrivateKey
	must(t, jwk.Export(s.priv, &priv))
	signing := b64(hdr) + "." + b64(payload)
	return signing + "." + b64(ed25519.Sign(priv, []byte(signing)))
}

// claimsJSON is claims() as JSON with extra members appended verbatim
// (duplicates included), or with a member's value replaced.
func claimsJSON(t testing.TB, replace map[string]string, extra string) []byte {
	t.Helper()
	c := claims()
	for k := range replace {
		delete(c, k)
	}
	body, err := json.Marshal(c)
	must(t, err)
	body = body[:len(body)-1]
	for k, v := range replace {
		body = append(body, `,"`+k+`":`+v...)
	}
	if extra != "" {
		body = append(body, ","+extra...)
	}
	return append(body, '}')
}

func b64(v any) string {
	b, ok := v.([]byte)
	if !ok {
		b, _ = json.Marshal(v)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// handmade builds a compact JWS by hand, for algorithms jwx refuses to
// produce on purpose (none) and for the HMAC confusion attack.
func handmade(hdr map[string]any, c map[string]any, macKey []byte) string {
	signing := b64(hdr) + "." + b64(c)
	if hdr["alg"] == "none" {
		return signing + "."
	}
	if macKey == nil { // a signature of the right length for Ed25519, by no key
		return signing + "." + b64(make([]byte, 64))
	}
	m := hmac.New(sha256.New, macKey)
	m.Write([]byte(signing))
	return signing + "." + b64(m.Sum(nil))
}

func newVerifier(t testing.TB, opts authn.Options) *authn.Verifier {
	t.Helper()
	if opts.Clock == nil {
		opts.Clock = simclock.New(t0.Add(time.Minute))
	}
	v, err := authn.New(context.Background(), opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = v.Close(context.Background()) })
	return v
}

func code(err error) authn.Code {
	if e, ok := err.(*authn.Error); ok {
		return e.Code
	}
	return ""
}
