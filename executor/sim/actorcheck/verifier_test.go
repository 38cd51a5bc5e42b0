package actorcheck_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign/executor/sim/actorcheck"
	"github.com/countersign/countersign/executor/sim/actorcheck/actorchecktest"
	"github.com/countersign/countersign/executor/simclock"
)

var t0 = time.Date(2026, 11, 3, 9, 0, 0, 0, time.UTC)

func newVerifier(t *testing.T, iss *actorchecktest.Issuer, o actorcheck.Options) *actorcheck.Verifier {
	t.Helper()
	if o.JWKSURL == "" && o.Keys == nil {
		o.JWKSURL = iss.JWKSURL()
	}
	if o.Clock == nil {
		o.Clock = simclock.New(t0.Add(time.Second))
	}
	v, err := actorcheck.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func newIssuer(t testing.TB) *actorchecktest.Issuer {
	iss := actorchecktest.NewIssuer(t)
	iss.Clock = simclock.New(t0)
	return iss
}

func TestCallHashPinned(t *testing.T) {
	const want = "53238c52084c58b6b08f4f8b003be330a393a775e4dfa596bd2634271410ff8d"
	if got := actorcheck.CallHash("issue_refund", []byte(`{"amount":3000,"order":"O-1001"}`)); got != want {
		t.Fatalf("CallHash = %s, want %s", got, want)
	}
	if got := actorcheck.RefundCall("O-1001", 3000); got != want {
		t.Fatalf("RefundCall = %s, want %s", got, want)
	}
	for _, c := range []struct{ got, want string }{
		{actorcheck.OrderCall("lookup_order", "O-1001"), actorcheck.CallHash("lookup_order", []byte(`{"order":"O-1001"}`))},
		{actorcheck.OrderCall("reship_order", "O-1001"), actorcheck.CallHash("reship_order", []byte(`{"order":"O-1001"}`))},
		{actorcheck.ReversalCall("L3"), actorcheck.CallHash("reverse_refund", []byte(`{"entry":"L3"}`))},
	} {
		if c.got != c.want {
			t.Errorf("binding %s, want %s", c.got, c.want)
		}
	}
}

// TestRefusals runs one request per reason code, each refused for exactly
// that reason, against a JWKS fetched over HTTP.
func TestRefusals(t *testing.T) {
	iss := newIssuer(t)
	call30 := actorcheck.RefundCall("O-1001", 3000)
	want30 := actorcheck.Want{Audience: "ledger", Scope: "refund", Call: call30, Amount: 3000}
	valid := func() map[string]any { return iss.Claims("rep-ana", "ledger", "refund", 50000, call30) }
	with := func(edit func(map[string]any)) string {
		c := valid()
		edit(c)
		return iss.Sign(t, c)
	}
	foreignCurrent := actorchecktest.NewKey(t, "epoch-1")
	foreignFuture := actorchecktest.NewKey(t, "epoch-7")
	idpKey := actorchecktest.NewKey(t, "dev-1")
	person := actorchecktest.SignWith(t, idpKey, map[string]any{
		"iss": "countersign-dev-idp", "sub": "rep-ana", "aud": "countersign", "role": "rep",
		"exp": t0.Add(time.Hour).Unix(),
	})
	forgedRS := "eyJhbGciOiJSUzI1NiIsImtpZCI6ImVwb2NoLTEifQ." + strings.Split(iss.Mint(t, "rep-ana", "ledger", "refund", 50000, call30), ".")[1] + ".c2ln"

	cases := []struct {
		name   string
		header string
		want   actorcheck.Want
		status int
		code   string
	}{
		{"valid", "Bearer " + iss.Sign(t, valid()), want30, 0, ""},
		{"valid, aud as one-element array", "Bearer " + with(func(c map[string]any) { c["aud"] = []string{"ledger"} }), want30, 0, ""},
		{"no header", "", want30, 401, actorcheck.CodeTokenMissing},
		{"basic scheme", "Basic cmVwOnB3", want30, 401, actorcheck.CodeTokenMissing},
		{"bearer without token", "Bearer ", want30, 401, actorcheck.CodeTokenMissing},
		{"two parts", "Bearer abc.def", want30, 401, actorcheck.CodeTokenMalformed},
		{"header not base64", "Bearer !!!.e30.c2ln", want30, 401, actorcheck.CodeTokenMalformed},
		{"payload not JSON", "Bearer eyJhbGciOiJFZERTQSJ9.bm90IGpzb24.c2ln", want30, 401, actorcheck.CodeTokenMalformed},
		{"alg none", "Bearer " + actorchecktest.Unsigned(t, "epoch-1", valid()), want30, 401, actorcheck.CodeAlgNotAllowed},
		{"HS256 over the public key bytes", "Bearer " + actorchecktest.SignHS256(t, iss.PublicKeyBytes(t, 1), "epoch-1", valid()), want30, 401, actorcheck.CodeAlgNotAllowed},
		{"RS256 header", "Bearer " + forgedRS, want30, 401, actorcheck.CodeAlgNotAllowed},
		{"person's token", "Bearer " + person, want30, 401, actorcheck.CodeNotActorToken},
		{"actor token from another issuer", "Bearer " + with(func(c map[string]any) { c["iss"] = "someone-else" }), want30, 401, actorcheck.CodeNotActorToken},
		{"kid is not an epoch", "Bearer " + actorchecktest.SignWith(t, actorchecktest.NewKey(t, "main"), valid()), want30, 401, actorcheck.CodeUnknownKid},
		{"unknown kid", "Bearer " + actorchecktest.SignWith(t, foreignFuture, valid()), want30, 401, actorcheck.CodeUnknownKid},
		{"foreign key with the current kid", "Bearer " + actorchecktest.SignWith(t, foreignCurrent, valid()), want30, 401, actorcheck.CodeBadSignature},
		{"missing exp", "Bearer " + with(func(c map[string]any) { delete(c, "exp") }), want30, 401, actorcheck.CodeExpMissing},
		{"expired (exp == now)", "Bearer " + with(func(c map[string]any) { c["exp"] = t0.Add(time.Second).Unix() }), want30, 401, actorcheck.CodeTokenExpired},
		{"expired long ago", "Bearer " + with(func(c map[string]any) { c["exp"] = t0.Add(-time.Hour).Unix() }), want30, 401, actorcheck.CodeTokenExpired},
		{"a lifetime of an hour", "Bearer " + with(func(c map[string]any) { c["exp"] = t0.Add(time.Hour).Unix() }), want30, 401, actorcheck.CodeTokenLifetime},
		{"a lifetime of 121 s", "Bearer " + with(func(c map[string]any) { c["exp"] = t0.Add(121 * time.Second).Unix() }), want30, 401, actorcheck.CodeTokenLifetime},
		{"issued an hour in the future", "Bearer " + with(func(c map[string]any) {
			c["iat"], c["exp"] = t0.Add(time.Hour).Unix(), t0.Add(time.Hour+time.Minute).Unix()
		}), want30, 401, actorcheck.CodeTokenLifetime},
		{"issued 6 s ahead of the receiver's clock", "Bearer " + with(func(c map[string]any) { c["iat"] = t0.Add(7 * time.Second).Unix() }), want30, 401, actorcheck.CodeTokenLifetime},
		{"valid, issued 4 s ahead (within the skew)", "Bearer " + with(func(c map[string]any) { c["iat"] = t0.Add(5 * time.Second).Unix() }), want30, 0, ""},
		{"missing iat", "Bearer " + with(func(c map[string]any) { delete(c, "iat") }), want30, 401, actorcheck.CodeTokenLifetime},
		{"missing jti", "Bearer " + with(func(c map[string]any) { delete(c, "jti") }), want30, 401, actorcheck.CodeTokenMalformed},
		{"epoch claim disagrees with kid", "Bearer " + with(func(c map[string]any) { c["epoch"] = 2 }), want30, 401, actorcheck.CodeTokenMalformed},
		{"aud of the other system", "Bearer " + with(func(c map[string]any) { c["aud"] = "orders" }), want30, 403, actorcheck.CodeWrongAudience},
		{"two audiences", "Bearer " + with(func(c map[string]any) { c["aud"] = []string{"ledger", "orders"} }), want30, 403, actorcheck.CodeWrongAudience},
		{"wrong scope", "Bearer " + with(func(c map[string]any) { c["scope"] = "reship" }), want30, 403, actorcheck.CodeWrongScope},
		{"$30 token used for $300", "Bearer " + iss.Sign(t, valid()),
			actorcheck.Want{Audience: "ledger", Scope: "refund", Call: actorcheck.RefundCall("O-1001", 30000), Amount: 30000}, 403, actorcheck.CodeCallMismatch},
		{"O-1001 token used for O-1002", "Bearer " + iss.Sign(t, valid()),
			actorcheck.Want{Audience: "ledger", Scope: "refund", Call: actorcheck.RefundCall("O-1002", 3000), Amount: 3000}, 403, actorcheck.CodeCallMismatch},
		{"valid, keyed for this request's key", "Bearer " + with(func(c map[string]any) { c["key"] = "K-A" }),
			actorcheck.Want{Audience: "ledger", Scope: "refund", Call: call30, Key: "K-A", Amount: 3000}, 0, ""},
		{"token for key A used with key B", "Bearer " + with(func(c map[string]any) { c["key"] = "K-A" }),
			actorcheck.Want{Audience: "ledger", Scope: "refund", Call: call30, Key: "K-B", Amount: 3000}, 403, actorcheck.CodeKeyMismatch},
		{"keyed token used without a key", "Bearer " + with(func(c map[string]any) { c["key"] = "K-A" }), want30, 403, actorcheck.CodeKeyMismatch},
		{"token without a key used with one", "Bearer " + iss.Sign(t, valid()),
			actorcheck.Want{Audience: "ledger", Scope: "refund", Call: call30, Key: "K-B", Amount: 3000}, 403, actorcheck.CodeKeyMismatch},
		{"token for reference R1 used for R2", "Bearer " + with(func(c map[string]any) { c["ref"] = "R1" }),
			actorcheck.Want{Audience: "ledger", Scope: "refund", Call: call30, Reference: "R2", Amount: 3000}, 403, actorcheck.CodeRefMismatch},
		{"token for 1 of line L2 used for 2", "Bearer " + with(func(c map[string]any) { c["line"], c["quantity"] = "L2", 1 }),
			actorcheck.Want{Audience: "ledger", Scope: "refund", Call: call30, Line: "L2", Quantity: 2, Amount: 3000}, 403, actorcheck.CodeLineMismatch},
		{"token for line L2 used for line L1", "Bearer " + with(func(c map[string]any) { c["line"], c["quantity"] = "L2", 1 }),
			actorcheck.Want{Audience: "ledger", Scope: "refund", Call: call30, Line: "L1", Quantity: 1, Amount: 3000}, 403, actorcheck.CodeLineMismatch},
		{"line token used for a refund by amount", "Bearer " + with(func(c map[string]any) { c["line"], c["quantity"] = "L2", 1 }), want30, 403, actorcheck.CodeLineMismatch},
		{"valid, for this line and quantity", "Bearer " + with(func(c map[string]any) { c["line"], c["quantity"] = "L2", 1 }),
			actorcheck.Want{Audience: "ledger", Scope: "refund", Call: call30, Line: "L2", Quantity: 1, Amount: 3000}, 0, ""},
		{"amount above max", "Bearer " + with(func(c map[string]any) { c["max"] = 2999 }), want30, 403, actorcheck.CodeAmountAboveMax},
		{"refund token without max", "Bearer " + with(func(c map[string]any) { delete(c, "max") }), want30, 403, actorcheck.CodeAmountAboveMax},
	}
	v := newVerifier(t, iss, actorcheck.Options{})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := v.Check(context.Background(), tc.header, tc.want)
			if tc.code == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if c.Subject != "rep-ana" || c.Agent != actorchecktest.Agent || c.Epoch != 1 || c.Max != 50000 || c.Call != call30 {
					t.Fatalf("claims = %+v", c)
				}
				return
			}
			var r *actorcheck.Refusal
			if !errors.As(err, &r) {
				t.Fatalf("err = %v, want a *Refusal %s", err, tc.code)
			}
			if r.Code != tc.code || r.Status != tc.status {
				t.Fatalf("refused %d %s (%s), want %d %s", r.Status, r.Code, r.Message, tc.status, tc.code)
			}
		})
	}
}

func TestEpochRotation(t *testing.T) {
	iss := newIssuer(t)
	call := actorcheck.OrderCall("reship_order", "O-1001")
	want := actorcheck.Want{Audience: "orders", Scope: "reship", Call: call}
	old := iss.Mint(t, "rep-ana", "orders", "reship", 50000, call)
	v := newVerifier(t, iss, actorcheck.Options{MaxAge: time.Hour})
	if _, err := v.Check(context.Background(), "Bearer "+old, want); err != nil {
		t.Fatalf("before rotation: %v", err)
	}
	iss.Rotate(t)
	fresh := iss.Mint(t, "rep-ana", "orders", "reship", 50000, call)
	// The cached set still has epoch-1; the new kid forces one refresh.
	if _, err := v.Check(context.Background(), "Bearer "+fresh, want); err != nil {
		t.Fatalf("token of the new epoch: %v", err)
	}
	_, err := v.Check(context.Background(), "Bearer "+old, want)
	var r *actorcheck.Refusal
	if !errors.As(err, &r) || r.Code != actorcheck.CodeEpochRevoked {
		t.Fatalf("old epoch after rotation: %v, want epoch_revoked", err)
	}
}

func TestMaxAgeZeroFetchesEveryRequest(t *testing.T) {
	iss := newIssuer(t)
	call := actorcheck.OrderCall("lookup_order", "O-1001")
	want := actorcheck.Want{Audience: "orders", Scope: "lookup", Call: call}
	old := iss.Mint(t, "rep-ana", "orders", "lookup", 0, call)
	// A token used three times, which only the single-use check would refuse.
	v := newVerifier(t, iss, actorcheck.Options{MaxAge: 0, AllowReplay: true})
	for range 3 {
		if _, err := v.Check(context.Background(), "Bearer "+old, want); err != nil {
			t.Fatal(err)
		}
	}
	if got := iss.Fetches(); got != 3 {
		t.Fatalf("JWKS fetched %d times for 3 requests, want 3", got)
	}
	iss.Rotate(t)
	_, err := v.Check(context.Background(), "Bearer "+old, want)
	var r *actorcheck.Refusal
	if !errors.As(err, &r) || r.Code != actorcheck.CodeEpochRevoked {
		t.Fatalf("right after rotation: %v, want epoch_revoked at once", err)
	}
}

func TestMaxAgeCachesAndExpires(t *testing.T) {
	iss := newIssuer(t)
	call := actorcheck.OrderCall("lookup_order", "O-1001")
	want := actorcheck.Want{Audience: "orders", Scope: "lookup", Call: call}
	tok := "Bearer " + iss.Mint(t, "rep-ana", "orders", "lookup", 0, call)
	v := newVerifier(t, iss, actorcheck.Options{MaxAge: 20 * time.Millisecond, AllowReplay: true}) // one token, many checks
	if _, err := v.Check(context.Background(), tok, want); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Check(context.Background(), tok, want); err != nil {
		t.Fatal(err)
	}
	if got := iss.Fetches(); got > 2 {
		t.Fatalf("fetched %d times within MaxAge", got)
	}
	// Once the cached copy is older than MaxAge a request fetches again.
	before := iss.Fetches()
	deadline := time.Now().Add(5 * time.Second)
	for iss.Fetches() == before {
		if time.Now().After(deadline) {
			t.Fatal("the JWKS was never fetched again after MaxAge")
		}
		if _, err := v.Check(context.Background(), tok, want); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond) // polling a condition, not waiting a fixed time
	}
}

func TestUnknownKidRefreshIsRateLimited(t *testing.T) {
	iss := newIssuer(t)
	call := actorcheck.OrderCall("lookup_order", "O-1001")
	want := actorcheck.Want{Audience: "orders", Scope: "lookup", Call: call}
	v := newVerifier(t, iss, actorcheck.Options{MaxAge: time.Hour, MinRefreshInterval: time.Hour})
	good := "Bearer " + iss.Mint(t, "rep-ana", "orders", "lookup", 0, call)
	if _, err := v.Check(context.Background(), good, want); err != nil {
		t.Fatal(err)
	}
	if iss.Fetches() != 1 {
		t.Fatalf("fetches = %d, want 1", iss.Fetches())
	}
	claims := iss.Claims("rep-ana", "orders", "lookup", 0, call)
	for n := range 5 {
		bogus := "Bearer " + actorchecktest.SignWith(t, actorchecktest.NewKey(t, "epoch-9"), claims)
		_, err := v.Check(context.Background(), bogus, want)
		var r *actorcheck.Refusal
		if !errors.As(err, &r) || r.Code != actorcheck.CodeUnknownKid {
			t.Fatalf("attempt %d: %v, want unknown_kid", n, err)
		}
	}
	if got := iss.Fetches(); got != 2 {
		t.Fatalf("fetches = %d after 5 unknown kids, want 2 (one refresh, then rate limited)", got)
	}
}

func TestJWKSUnavailableFailsClosed(t *testing.T) {
	iss := newIssuer(t)
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "down", http.StatusBadGateway)
	}))
	t.Cleanup(down.Close)
	v := newVerifier(t, iss, actorcheck.Options{JWKSURL: down.URL})
	call := actorcheck.OrderCall("lookup_order", "O-1001")
	_, err := v.Verify(context.Background(), "Bearer "+iss.Mint(t, "rep-ana", "orders", "lookup", 0, call))
	if !errors.Is(err, actorcheck.ErrKeysUnavailable) {
		t.Fatalf("err = %v, want ErrKeysUnavailable", err)
	}
}

func TestStaticKeysAndInjectedClock(t *testing.T) {
	iss := newIssuer(t)
	call := actorcheck.OrderCall("lookup_order", "O-1001")
	tok := "Bearer " + iss.Mint(t, "rep-ana", "orders", "lookup", 0, call)
	clock := simclock.New(t0)
	v := newVerifier(t, iss, actorcheck.Options{Keys: iss.PublicSet(t), Clock: clock})
	if _, err := v.Verify(context.Background(), tok); err != nil {
		t.Fatal(err)
	}
	clock.Advance(61 * time.Second)
	_, err := v.Verify(context.Background(), tok)
	var r *actorcheck.Refusal
	if !errors.As(err, &r) || r.Code != actorcheck.CodeTokenExpired {
		t.Fatalf("61 s later: %v, want token_expired", err)
	}
	if iss.Fetches() != 0 {
		t.Fatalf("a static set fetched the JWKS %d times", iss.Fetches())
	}
}

func TestNewValidates(t *testing.T) {
	for name, o := range map[string]actorcheck.Options{
		"no source":       {},
		"negative maxage": {JWKSURL: "http://127.0.0.1:1/jwks.json", MaxAge: -time.Second},
	} {
		if _, err := actorcheck.New(o); err == nil {
			t.Errorf("%s: New accepted %+v", name, o)
		}
	}
}

// FuzzVerify feeds arbitrary Authorization values to the verifier: it must
// refuse everything it cannot verify with a *Refusal, never panic, and never
// accept a token not signed by the issuer.
func FuzzVerify(f *testing.F) {
	iss := newIssuer(f)
	call := actorcheck.RefundCall("O-1001", 3000)
	good := iss.Mint(f, "rep-ana", "ledger", "refund", 50000, call)
	f.Add("Bearer " + good)
	f.Add("Bearer " + good[:len(good)-4] + "AAAA")
	f.Add("Bearer " + actorchecktest.Unsigned(f, "epoch-1", iss.Claims("rep-ana", "ledger", "refund", 50000, call)))
	f.Add("Bearer e30.e30.")
	f.Add("bearer a.b.c")
	f.Add("")
	// AllowReplay: the issuer's token, spelled differently, must verify
	// with the same claims every time, not be refused as a replay.
	v, err := actorcheck.New(actorcheck.Options{Keys: iss.PublicSet(f), Clock: simclock.New(t0), AllowReplay: true})
	if err != nil {
		f.Fatal(err)
	}
	goodClaims, err := v.Verify(context.Background(), "Bearer "+good)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, header string) {
		c, err := v.Verify(context.Background(), header)
		if err == nil {
			// Only the issuer's token verifies (perhaps spelled differently:
			// scheme case, spaces, base64 padding bits); its claims cannot
			// change.
			if c.Subject != "rep-ana" || c.Call != call || c.ID != goodClaims.ID || c.Max != 50000 {
				t.Fatalf("accepted claims the issuer did not sign: %q -> %+v", header, c)
			}
			return
		}
		var r *actorcheck.Refusal
		if !errors.As(err, &r) {
			t.Fatalf("non-refusal error %v", err)
		}
		if r.Status != 401 {
			t.Fatalf("Verify answered %d", r.Status)
		}
	})
}

// TestTokenIsSingleUse: a token is accepted once; the same token again,
// even for the same request, is token_replayed, unless the control is
// removed.
func TestTokenIsSingleUse(t *testing.T) {
	iss := newIssuer(t)
	call := actorcheck.OrderCall("reship_order", "O-1001")
	want := actorcheck.Want{Audience: "orders", Scope: "reship", Call: call}
	for _, tc := range []struct {
		name        string
		allowReplay bool
		second      string // the refusal code of the second use; "" accepted
	}{
		{"a second use is refused", false, actorcheck.CodeTokenReplayed},
		{"with the check removed a second use is accepted", true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := newVerifier(t, iss, actorcheck.Options{AllowReplay: tc.allowReplay})
			tok := "Bearer " + iss.Mint(t, "rep-ana", "orders", "reship", 0, call)
			if _, err := v.Check(context.Background(), tok, want); err != nil {
				t.Fatalf("first use: %v", err)
			}
			_, err := v.Check(context.Background(), tok, want)
			var r *actorcheck.Refusal
			switch {
			case tc.second == "" && err != nil:
				t.Fatalf("second use: %v, want accepted", err)
			case tc.second != "" && (!errors.As(err, &r) || r.Code != tc.second || r.Status != 401):
				t.Fatalf("second use: %v, want 401 %s", err, tc.second)
			}
			if _, err := v.Check(context.Background(), "Bearer "+iss.Mint(t, "rep-ana", "orders", "reship", 0, call), want); err != nil {
				t.Fatalf("a freshly minted token for the same call: %v", err)
			}
		})
	}
}

// Twenty concurrent uses of one token: exactly one is accepted.
func TestConcurrentUsesOfOneToken(t *testing.T) {
	iss := newIssuer(t)
	call := actorcheck.OrderCall("reship_order", "O-1001")
	want := actorcheck.Want{Audience: "orders", Scope: "reship", Call: call}
	v := newVerifier(t, iss, actorcheck.Options{Keys: iss.PublicSet(t)})
	tok := "Bearer " + iss.Mint(t, "rep-ana", "orders", "reship", 0, call)
	var accepted atomic.Int64
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if _, err := v.Check(context.Background(), tok, want); err == nil {
				accepted.Add(1)
			}
		})
	}
	wg.Wait()
	if n := accepted.Load(); n != 1 {
		t.Fatalf("%d of 20 concurrent uses accepted, want 1", n)
	}
}
