package stack_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwk"

	"github.com/countersign/countersign/bundles"
	"github.com/countersign/countersign/cmd/stack"
	"github.com/countersign/countersign/executor/buildinfo"
	"github.com/countersign/countersign/executor/fixture"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/sim/idp"
	"github.com/countersign/countersign/sidecar/authn"
)

// TestProductionWiringLinksNoSimulator: the production wiring links
// nothing of the simulated systems of record or of the Quillfeather
// fixture. A production binary that could start a simulator, or that knew
// the fixture's people, would be one import away from trusting them.
func TestProductionWiringLinksNoSimulator(t *testing.T) {
	const module = "github.com/countersign/countersign/"
	out, err := exec.Command("go", "list", "-deps", module+"cmd/stack").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 || !strings.Contains(string(out), module+"sidecar\n") {
		t.Fatalf("go list -deps ./cmd/stack does not list the sidecar; the check would prove nothing:\n%s", out)
	}
	for _, p := range deps {
		for _, banned := range []string{"executor/sim", "executor/fixture", "cmd/devstack", "cmd/scenario"} {
			if p == module+banned || strings.HasPrefix(p, module+banned+"/") {
				t.Errorf("cmd/stack links %s", p)
			}
		}
	}
}

// production are valid options against systems that are not there: enough
// to start, not to serve a step.
func production(t *testing.T) stack.Options {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	key, err := jwk.Import(pub)
	if err != nil {
		t.Fatal(err)
	}
	if err := key.Set(jwk.KeyIDKey, "k1"); err != nil {
		t.Fatal(err)
	}
	set := jwk.NewSet()
	if err := set.AddKey(key); err != nil {
		t.Fatal(err)
	}
	return stack.Options{DataDir: t.TempDir(), Agent: "support-agent", LedgerURL: "http://127.0.0.1:1", OrdersURL: "http://127.0.0.1:1",
		Issuers: []authn.Issuer{{Name: "idp", Keys: set}}}
}

// TestStartRefusesWhatAPersonMustFix: the production wiring refuses a held
// data directory, an address in use and a data directory that cannot be
// created, each as a *StartError of its kind in one line.
func TestStartRefusesWhatAPersonMustFix(t *testing.T) {
	running := production(t)
	first, err := stack.Start(context.Background(), running)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { first.Close() })
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	held, busy := production(t), production(t)
	held.DataDir = running.DataDir
	busy.Listen = strings.TrimPrefix(first.URL, "http://")
	unwritable := production(t)
	unwritable.DataDir = filepath.Join(file, "data")
	for _, tc := range []struct {
		name     string
		o        stack.Options
		kind     error
		wantText string
	}{
		{"a data dir held by a running sidecar is locked", held, stack.ErrDataDirLocked, "pid"},
		{"an address in use is refused", busy, stack.ErrAddrInUse, busy.Listen},
		{"a data dir under a regular file is unwritable", unwritable, stack.ErrDataDirUnwritable, "not a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := stack.Start(context.Background(), tc.o)
			var se *stack.StartError
			if st != nil || !errors.Is(err, tc.kind) || !errors.As(err, &se) {
				t.Fatalf("Start = %v, %v; want a *StartError %v", st, err, tc.kind)
			}
			if tc.kind == stack.ErrDataDirLocked && se.PID != os.Getpid() {
				t.Errorf("holder pid %d, want this process, %d", se.PID, os.Getpid())
			}
			if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, tc.wantText) {
				t.Errorf("message %q is not one line naming %q", msg, tc.wantText)
			}
		})
	}
}

// TestValidateReportsEveryProblem: a person fixing a configuration sees
// the whole list at once.
func TestValidateReportsEveryProblem(t *testing.T) {
	err := stack.Options{LedgerURL: "ftp://ledger", PolicyTimeout: -1, MCPAllowedOrigins: []string{"*"}, DispatchTokenTTL: 10 * time.Minute}.Validate()
	if err == nil {
		t.Fatal("empty options are valid")
	}
	for _, want := range []string{"DataDir", "Agent", "LedgerURL", "OrdersURL", "Issuers", "PolicyTimeout", "MCPAllowedOrigins", "dispatch token TTL 10m0s is over 2m0s"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v does not name %s", err, want)
		}
	}
	if _, err := stack.Start(context.Background(), stack.Options{}); err == nil {
		t.Fatal("Start with empty options succeeded")
	}
	if err := production(t).Validate(); err != nil {
		t.Fatalf("valid options: %v", err)
	}
}

// A fresh production sidecar has no bundle, so it is not ready until an
// operator activates one through the gate; it is alive all the same.
func TestFreshSidecarIsAliveNotReady(t *testing.T) {
	st, err := stack.Start(context.Background(), production(t))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for path, want := range map[string]int{"/healthz": http.StatusOK, "/readyz": http.StatusServiceUnavailable} {
		res, err := http.Get(st.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != want {
			t.Errorf("%s: %d, want %d", path, res.StatusCode, want)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// A sidecar given a bundle verification key answers an unsigned upload
// 422 bundle_signature_invalid and keeps its active bundle; a signed one
// activates, and a restart restores it. An unsigned bundle at start stops
// the start.
func TestBundleVerificationKey(t *testing.T) {
	trusted, tokens := devIssuer(t)
	signer, verifier := signingPair(t)
	sign := func(name string) []byte {
		files, err := bundles.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		archive, err := signer.Sign(files)
		if err != nil {
			t.Fatal(err)
		}
		return archive
	}
	signedP1, err := policy.LoadArchive(sign("p1"))
	if err != nil {
		t.Fatal(err)
	}
	o := production(t)
	o.Issuers = []authn.Issuer{trusted}
	o.BundleVerifier, o.Bundle = verifier, signedP1
	st, err := stack.Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })

	upload := func(archive []byte) (int, string) { return uploadBundle(t, st.URL, tokens["ops-ida"], archive) }
	unsigned, err := bundles.Archive("p3")
	if err != nil {
		t.Fatal(err)
	}
	if status, code := upload(unsigned); status != http.StatusUnprocessableEntity || code != "bundle_signature_invalid" {
		t.Errorf("unsigned p3: %d %s, want 422 bundle_signature_invalid", status, code)
	}
	if rev := st.Policy.Revision(); rev != "p1" {
		t.Errorf("after the refused upload %s is active, want p1", rev)
	}
	if status, code := upload(sign("p3")); status != http.StatusCreated {
		t.Errorf("signed p3: %d %s, want 201", status, code)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	o.Bundle = nil
	again, err := stack.Start(context.Background(), o)
	if err != nil {
		t.Fatalf("restart restoring the signed p3: %v", err)
	}
	if rev := again.Policy.Revision(); rev != "p3" {
		t.Errorf("restored %s, want p3", rev)
	}
	if err := again.Close(); err != nil {
		t.Fatal(err)
	}
	o.Bundle, err = policy.LoadArchive(unsigned)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := stack.Start(context.Background(), o); !errors.Is(err, policy.ErrSignatureInvalid) {
		if st != nil {
			st.Close()
		}
		t.Errorf("start with an unsigned bundle: %v, want ErrSignatureInvalid", err)
	}
}

// TestSignaturesRequiredOverAnUnsignedHistory: a sidecar that ran unsigned
// bundles is restarted with a verification key. Its recorded bundle no
// longer loads, so the start stops and says to pass --bundle; with a
// signed bundle it starts, that bundle replacing the unsigned one.
func TestSignaturesRequiredOverAnUnsignedHistory(t *testing.T) {
	o := production(t)
	unsigned, err := bundles.Archive("p1")
	if err != nil {
		t.Fatal(err)
	}
	if o.Bundle, err = policy.LoadArchive(unsigned); err != nil {
		t.Fatal(err)
	}
	st, err := stack.Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	signer, verifier := signingPair(t)
	o.BundleVerifier, o.Bundle = verifier, nil
	if st, err := stack.Start(context.Background(), o); !errors.Is(err, policy.ErrSignatureInvalid) {
		if st != nil {
			st.Close()
		}
		t.Fatalf("restart restoring the unsigned p1: %v, want ErrSignatureInvalid", err)
	}
	files, err := bundles.Open("p3")
	if err != nil {
		t.Fatal(err)
	}
	archive, err := signer.Sign(files)
	if err != nil {
		t.Fatal(err)
	}
	if o.Bundle, err = policy.LoadArchive(archive); err != nil {
		t.Fatal(err)
	}
	st, err = stack.Start(context.Background(), o)
	if err != nil {
		t.Fatalf("restart with a signed p3: %v", err)
	}
	defer st.Close()
	if rev := st.Policy.Revision(); rev != "p3" {
		t.Errorf("active %s, want p3", rev)
	}
}

// devIssuer is a dev identity provider as a production stack trusts one,
// its keys in a file, and a token for every fixture person.
func devIssuer(t *testing.T) (authn.Issuer, map[string]string) {
	t.Helper()
	dir := t.TempDir()
	issuer, err := idp.Open(idp.Options{Dir: filepath.Join(dir, "idp")})
	if err != nil {
		t.Fatal(err)
	}
	jwks := filepath.Join(dir, "jwks.json")
	if err := os.WriteFile(jwks, issuer.JWKSJSON(), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens, err := issuer.Tokens(fixture.People(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return authn.Issuer{Name: issuer.Name(), JWKSFile: jwks}, tokens
}

// uploadBundle posts archive to the sidecar at url as the operator whose
// token is given, and returns the status and the error code, if any.
func uploadBundle(t *testing.T, url, token string, archive []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/v1/bundles", bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/gzip")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var body struct {
		Error struct{ Code string } `json:"error"`
	}
	_ = json.NewDecoder(res.Body).Decode(&body)
	return res.StatusCode, body.Error.Code
}

// signingPair is a signer and the verifier of its key.
func signingPair(t *testing.T) (*policy.Signer, *policy.Verifier) {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	privDER, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&priv.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := policy.NewSigner(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: privDER}), "")
	if err != nil {
		t.Fatal(err)
	}
	verifier, err := policy.NewVerifier(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), "")
	if err != nil {
		t.Fatal(err)
	}
	return signer, verifier
}

// A sidecar started with a bundle that is not a pure tightening of the
// baseline (here p1 with R7 sparing rep-ben) records it as awaiting a
// second operator and starts without it, not ready; a second operator
// approves it over the API and the sidecar is ready with it. A refused
// start would have left no API to approve it through.
func TestStartWithABundleThatNeedsASecondOperator(t *testing.T) {
	trusted, tokens := devIssuer(t)
	const r7 = "} else := require_approval(\"R7-refund-needs-approval\") if {\n\tnot within_auto_refund\n"
	fsys, err := bundles.Variant("p1", "p1-ben", func(s string) string {
		return strings.Replace(s, r7, r7+"\tinput.user.id != \"rep-ben\"\n", 1)
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := policy.LoadFS(fsys)
	if err != nil {
		t.Fatal(err)
	}
	o := production(t)
	o.Issuers, o.Bundle = []authn.Issuer{trusted}, b
	st, err := stack.Start(context.Background(), o)
	if err != nil {
		t.Fatalf("start with p1-ben: %v", err)
	}
	defer st.Close()
	if rev := st.Policy.Revision(); rev != "" {
		t.Fatalf("active %q at start, want none until a second operator approves p1-ben", rev)
	}
	status := func(method, path, token string) int {
		req, err := http.NewRequest(method, st.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if code := status(http.MethodGet, "/readyz", ""); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz %d, want 503", code)
	}
	if code := status(http.MethodPost, "/v1/bundles/"+b.Digest()+"/approve", tokens["ops-jon"]); code != http.StatusCreated {
		t.Fatalf("ops-jon approving p1-ben: %d", code)
	}
	if code := status(http.MethodGet, "/readyz", ""); code != http.StatusOK || st.Policy.Revision() != "p1-ben" {
		t.Errorf("/readyz %d with %q active, want 200 and p1-ben", code, st.Policy.Revision())
	}
}

// A webhook without its secret, a secret without its webhook and a
// webhook that is not a URL are each named, without repeating the
// webhook's URL (a chat service's URL is its credential).
func TestValidateNotifyOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*stack.Options)
		says string
	}{
		{"a webhook without a secret", func(o *stack.Options) { o.NotifyWebhook = "https://hooks.example/T0/SECRETPATH" }, "NotifyWebhook needs NotifyWebhookSecret"},
		{"a secret without a webhook", func(o *stack.Options) { o.NotifyWebhookSecret = []byte("s") }, "NotifyWebhookSecret is set without NotifyWebhook"},
		{"a webhook that is not http(s)", func(o *stack.Options) {
			o.NotifyWebhook, o.NotifyWebhookSecret = "ftp://hooks.example/SECRETPATH", []byte("s")
		}, "NotifyWebhook must be an absolute http(s) URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := production(t)
			tc.edit(&o)
			err := o.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("Validate: %v, want it to say %q", err, tc.says)
			}
			if strings.Contains(err.Error(), "SECRETPATH") {
				t.Errorf("%v repeats the webhook URL", err)
			}
		})
	}
	o := production(t)
	o.NotifyWebhook, o.NotifyWebhookSecret, o.PublicURL = "https://hooks.example/x", []byte("s"), "https://approvals.example"
	if err := o.Validate(); err != nil {
		t.Fatalf("valid notify options: %v", err)
	}
}

// Every sidecar says which build it runs on /metrics, before any event.
func TestMetricsCarryTheBuild(t *testing.T) {
	st, err := stack.Start(context.Background(), production(t))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	res, err := http.Get(st.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	b := buildinfo.Read()
	want := fmt.Sprintf(`countersign_build_info{go_version=%q,opa_version=%q,revision=%q,version=%q} 1`, b.GoVersion, b.OPAVersion, b.Revision, b.Version)
	if !strings.Contains(string(body), want) {
		t.Errorf("/metrics lacks %s", want)
	}
	if b.OPAVersion == buildinfo.Unknown {
		t.Errorf("a sidecar links OPA, yet its version reads unknown")
	}
}
