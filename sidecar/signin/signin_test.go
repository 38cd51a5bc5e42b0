package signin_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/executor/fixture"
	"github.com/countersign/countersign/executor/sim/idp"
	"github.com/countersign/countersign/executor/simclock"
	"github.com/countersign/countersign/sidecar/authn"
	"github.com/countersign/countersign/sidecar/signin"
)

const callback = "http://127.0.0.1:1/login/callback"

// world is the dev identity provider on a real socket, a relying party
// of it, and the clock both read.
type world struct {
	idp   *idp.Provider
	rp    *signin.Provider
	clock *simclock.Clock
}

func newWorld(t *testing.T, clientID string) world {
	t.Helper()
	clk := simclock.New(time.Now().UTC().Truncate(time.Second))
	iss, err := idp.Open(idp.Options{Dir: t.TempDir(), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(nil)
	op, err := iss.Provider(idp.ProviderOptions{URL: "http://" + srv.Listener.Addr().String(), People: fixture.People(),
		Clients: []idp.Client{{ID: "lead-page", Secret: "s3cret", RedirectURIs: []string{callback}}}})
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = op
	srv.Start()
	t.Cleanup(srv.Close)
	rp, err := signin.New(context.Background(), signin.Options{Issuer: op.URL(), ClientID: clientID, ClientSecret: "s3cret",
		RedirectURL: callback, Clock: clk})
	if err != nil {
		t.Fatalf("signin.New: %v", err)
	}
	return world{idp: op, rp: rp, clock: clk}
}

var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// signIn begins a sign-in, picks who at the provider and returns the
// attempt and what the provider sent back to the callback.
func (w world) signIn(t *testing.T, who string) (signin.Attempt, url.Values) {
	t.Helper()
	a, to := w.rp.Begin()
	u, _ := url.Parse(to)
	q := u.Query()
	for name, want := range map[string]string{"code_challenge_method": "S256", "nonce": a.Nonce, "state": a.State, "redirect_uri": callback} {
		if q.Get(name) != want {
			t.Fatalf("the authorization URL has %s=%q, want %q: %s", name, q.Get(name), want, to)
		}
	}
	q.Set("login_hint", who)
	u.RawQuery = q.Encode()
	res, err := noRedirect.Get(u.String())
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	back, err := url.Parse(res.Header.Get("Location"))
	if err != nil || res.StatusCode != http.StatusFound {
		t.Fatalf("the provider answered %d to %q", res.StatusCode, res.Header.Get("Location"))
	}
	return a, back.Query()
}

// wantRefused fails unless err is a refusal with code.
func wantRefused(t *testing.T, err error, code string, status int) {
	t.Helper()
	var se *signin.Error
	var ae *authn.Error
	switch {
	case errors.As(err, &se):
		if se.Code != code || se.Status != status {
			t.Errorf("refused %d %s (%v), want %d %s", se.Status, se.Code, err, status, code)
		}
	case errors.As(err, &ae):
		if string(ae.Code) != code || status != http.StatusUnauthorized {
			t.Errorf("refused %s (%v), want %d %s", ae.Code, err, status, code)
		}
	default:
		t.Errorf("err %v, want a refusal %s", err, code)
	}
}

// A lead signs in: the ID token verifies, names the person with the
// claims of their bearer token, and verifies again later, until it
// expires.
func TestSignInWithTheProvider(t *testing.T) {
	w := newWorld(t, "lead-page")
	a, back := w.signIn(t, "lead-eli")
	raw, who, err := w.rp.Finish(context.Background(), a, back)
	if err != nil {
		t.Fatalf("Finish: %v", err)
	}
	if who.ID != "lead-eli" || who.Role != "lead" || who.Region != "US" || who.ApproveLimit != 50000 || who.Issuer != w.idp.URL() ||
		!who.Expires.Equal(w.clock.Now().Add(idp.DefaultIDTokenTTL)) {
		t.Errorf("person %+v", who)
	}
	if again, err := w.rp.Verify(context.Background(), raw); err != nil || again.ID != "lead-eli" {
		t.Errorf("Verify later: %+v %v", again, err)
	}
	w.clock.Advance(idp.DefaultIDTokenTTL + time.Second)
	_, err = w.rp.Verify(context.Background(), raw)
	wantRefused(t, err, signin.CodeTokenExpired, http.StatusUnauthorized)
}

// Every way a callback or its ID token can be wrong is refused, with a
// code that says which.
func TestSignInRefusals(t *testing.T) {
	ctx := context.Background()
	t.Run("a callback whose state is not the attempt's", func(t *testing.T) {
		w := newWorld(t, "lead-page")
		a, back := w.signIn(t, "lead-eli")
		other := a
		other.State = "another-tab"
		_, _, err := w.rp.Finish(ctx, other, back)
		wantRefused(t, err, signin.CodeStateInvalid, http.StatusBadRequest)
		_, _, err = w.rp.Finish(ctx, signin.ParseAttempt(""), back) // no sign-in cookie at all
		wantRefused(t, err, signin.CodeStateInvalid, http.StatusBadRequest)
	})
	t.Run("an ID token whose nonce is not the attempt's", func(t *testing.T) {
		w := newWorld(t, "lead-page")
		w.idp.SetFaults(idp.Faults{Nonce: "replayed"})
		a, back := w.signIn(t, "lead-eli")
		_, _, err := w.rp.Finish(ctx, a, back)
		wantRefused(t, err, signin.CodeNonceInvalid, http.StatusUnauthorized)
	})
	t.Run("an ID token for another audience", func(t *testing.T) {
		w := newWorld(t, "lead-page")
		w.idp.SetFaults(idp.Faults{Audience: "another-app"})
		a, back := w.signIn(t, "lead-eli")
		_, _, err := w.rp.Finish(ctx, a, back)
		wantRefused(t, err, signin.CodeIDTokenInvalid, http.StatusUnauthorized)
	})
	t.Run("a code exchanged with another verifier", func(t *testing.T) {
		w := newWorld(t, "lead-page")
		a, back := w.signIn(t, "lead-eli")
		other := "x"
		if a.Verifier[0] == 'x' { // one verifier in 64 starts so: it must differ
			other = "y"
		}
		a.Verifier = other + a.Verifier[1:]
		_, _, err := w.rp.Finish(ctx, a, back)
		wantRefused(t, err, signin.CodeExchangeFailed, http.StatusUnauthorized)
	})
	t.Run("the provider's own refusal", func(t *testing.T) {
		w := newWorld(t, "lead-page")
		a, _ := w.rp.Begin()
		_, _, err := w.rp.Finish(ctx, a, url.Values{"state": {a.State}, "error": {"access_denied"}})
		wantRefused(t, err, signin.CodeProviderError, http.StatusUnauthorized)
	})
}

// An attempt survives its cookie; a value that is not one matches no
// callback.
func TestAttemptCookie(t *testing.T) {
	w := newWorld(t, "lead-page")
	a, _ := w.rp.Begin()
	if got := signin.ParseAttempt(a.String()); got != a {
		t.Errorf("ParseAttempt(%q) = %+v, want %+v", a.String(), got, a)
	}
	for _, v := range []string{"", "a.b", "a..c", "a.b.c.d"} {
		if got := signin.ParseAttempt(v); got != (signin.Attempt{}) {
			t.Errorf("ParseAttempt(%q) = %+v, want the zero attempt", v, got)
		}
	}
}

func TestOptionsReportEveryProblem(t *testing.T) {
	err := signin.Options{Issuer: "idp.example", RedirectURL: "https://cs.example/elsewhere"}.Validate()
	if !errors.Is(err, signin.ErrInvalidOptions) {
		t.Fatalf("Validate = %v, want ErrInvalidOptions", err)
	}
	for _, want := range []string{"issuer", "client id", "client secret", "redirect url"} {
		if !strings.Contains(strings.ToLower(err.Error()), want) {
			t.Errorf("%v does not mention the %s", err, want)
		}
	}
}
