package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/bundles"
	"github.com/countersign/countersign/cmd/devstack"
	"github.com/countersign/countersign/executor/policy"
)

// runRelease runs countersign bundle args and returns its standard output
// and error.
func runRelease(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(io.Discard)
	root.SetArgs(append([]string{"bundle"}, args...))
	err := root.ExecuteContext(context.Background())
	t.Logf("countersign bundle %s: %v\n%s", strings.Join(args, " "), err, out.String()) // shown with -v and on failure
	return out.String(), err
}

// declared75 writes p1's rules with the auto limit raised from $50.00 to
// $75.00 and the change declared, as revision p4: a loosening the gate
// passes and a second operator must approve. It returns the path and the
// digest.
func declared75(t *testing.T) (string, string) {
	t.Helper()
	p1, err := bundles.Open("p1")
	if err != nil {
		t.Fatal(err)
	}
	data, err := fs.ReadFile(p1, "data.json")
	if err != nil {
		t.Fatal(err)
	}
	raised := bytes.Replace(data, []byte(`"refund_auto": 5000`), []byte(`"refund_auto": 7500`), 1)
	if bytes.Equal(raised, data) {
		t.Fatalf("p1's data.json has no refund_auto of 5000:\n%s", data)
	}
	src, err := policy.Source(p1, raised, "p4", []policy.LimitChange{{Name: "refund_auto", From: 5000, To: 7500}})
	if err != nil {
		t.Fatal(err)
	}
	archive, err := policy.Build(src)
	if err != nil {
		t.Fatal(err)
	}
	b, err := policy.LoadArchive(archive)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "p4.tar.gz")
	if err := os.WriteFile(path, archive, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, b.Digest()
}

// tokenFiles writes each fixture person's token to a file of its own.
func tokenFiles(t *testing.T, st *devstack.Stack) map[string]string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{}
	for who, token := range st.Tokens {
		files[who] = filepath.Join(dir, who+".jwt")
		if err := os.WriteFile(files[who], []byte(token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return files
}

// sameJSON fails unless got and want hold the same JSON value.
func sameJSON(t *testing.T, what string, got, want []byte) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: --json printed no JSON: %v\n%s", what, err, got)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("%s: the API answered no JSON: %v\n%s", what, err, want)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s: --json printed\n%s\nthe API answered\n%s", what, got, want)
	}
}

// The release path over real sockets, with the CLI only: a loosening
// bundle's dry run (what flips, for how much), its upload by one operator
// (awaiting, and who must approve), the same operator's approval refused,
// the status, the second operator's approval, the diff of the limit, and
// a rollback to the previous digest; each --json is the API's answer.
func TestBundleReleasePath(t *testing.T) {
	st, err := devstack.Start(context.Background(), devstack.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	seedDecisions(t, st)
	tokens := tokenFiles(t, st)
	as := func(who string) []string {
		return []string{"--sidecar", st.Endpoints.Sidecar, "--token-file", tokens[who]}
	}
	p4, p4Digest := declared75(t)
	_, p1Body := apiCall(t, st, http.MethodGet, "/v1/bundles/active", "ops-ida", nil)
	var p1 struct{ Digest string }
	if err := json.Unmarshal(p1Body, &p1); err != nil || p1.Digest == "" {
		t.Fatalf("the active bundle: %v %s", err, p1Body)
	}

	// The dry run: the three refunds between $50 and $75 that waited for
	// a lead would be allowed, $185.00 in all; no rule changes alone.
	out, err := runRelease(t, append([]string{"upload", p4, "--dry-run"}, as("ops-ida")...)...)
	if err != nil {
		t.Fatalf("dry run: %v\n%s", err, out)
	}
	flat := strings.Join(strings.Fields(out), " ")
	for _, want := range []string{
		"gate PASS: p4 (sha256 " + p4Digest + ")", "declared change: refund_auto 5000 → 7500",
		"6 decisions replayed, 3 would change ($185.00 in all)",
		"FROM TO RULE COUNT AMOUNT EXAMPLES",
		"REQUIRE_APPROVAL ALLOW default-allow-after-checks 3 $185.00 W1/2 O-1002 $60.00, W2/1 O-1002 $70.00, W2/3 O-1005 $55.00",
		"no decision would keep its outcome by another rule",
		"data.countersign.limits.refund_auto 5000 → 7500 loosens refund_auto",
		"dry run: nothing was activated or recorded; an upload would wait for a second operator",
	} {
		if !strings.Contains(flat, want) {
			t.Errorf("the dry run lacks %q:\n%s", want, out)
		}
	}
	out, err = runRelease(t, append([]string{"upload", p4, "--dry-run", "--json"}, as("ops-ida")...)...)
	if err != nil {
		t.Fatalf("dry run --json: %v\n%s", err, out)
	}
	archive, err := os.ReadFile(p4)
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "dry run", []byte(out), upload(t, st, "ops-ida", "?dry_run=true", archive, http.StatusOK))

	// A rule renamed shows in the dry run as decisions that keep their
	// outcome by another rule; the gate, whose cases name R7, refuses it.
	renamed := filepath.Join(t.TempDir(), "renamed.tar.gz")
	writeBundle(t, renamed, func(s string) string {
		return strings.ReplaceAll(s, "R7-refund-needs-approval", "R13-refund-needs-approval")
	})
	out, err = runRelease(t, append([]string{"upload", renamed, "--dry-run"}, as("ops-ida")...)...)
	flat = strings.Join(strings.Fields(out), " ")
	if err == nil || !strings.Contains(err.Error(), "the gate would refuse p1-edited: nothing was activated") ||
		!strings.Contains(flat, "gate FAIL: p1-edited") || !strings.Contains(flat, "0 would change ($0.00 in all)") ||
		!strings.Contains(flat, "REQUIRE_APPROVAL R7-refund-needs-approval R13-refund-needs-approval 3 $185.00 W1/2 O-1002 $60.00") ||
		!strings.Contains(flat, "an upload would be refused (422 gate_failed)") {
		t.Errorf("dry run of R7 renamed R13: %v\n%s", err, out)
	}

	out, err = runRelease(t, append([]string{"upload", renamed}, as("ops-ida")...)...)
	if err == nil || !strings.Contains(err.Error(), "the sidecar answered 422 gate_failed: ") || !strings.Contains(err.Error(), "countersign bundle test FILE") ||
		!strings.Contains(strings.Join(strings.Fields(out), " "), "FAILED CASE AMOUNT EXPECTED GOT refund above the auto limit $51.00 REQUIRE_APPROVAL (R7-refund-needs-approval) REQUIRE_APPROVAL (R13-refund-needs-approval)") {
		t.Errorf("upload of R7 renamed R13: %v\n%s", err, out)
	}

	// The upload waits, and says who may approve it and how.
	out, err = runRelease(t, append([]string{"upload", p4}, as("ops-ida")...)...)
	flat = strings.Join(strings.Fields(out), " ")
	for _, want := range []string{
		"p4 (sha256 " + p4Digest + ") awaits a second operator", "limit change: refund_auto 5000 → 7500",
		"3 would change ($185.00 in all)",
		"next: an operator other than ops-ida approves it with their own token: countersign bundle approve " + p4Digest,
	} {
		if err != nil || !strings.Contains(flat, want) {
			t.Errorf("upload: %v; the answer lacks %q:\n%s", err, want, out)
		}
	}

	// The uploader's approval is the API's 403 same_operator, and exits 1.
	out, err = runRelease(t, append([]string{"approve", p4Digest}, as("ops-ida")...)...)
	var exit *exitError
	if !errors.As(err, &exit) || exit.code != 1 || !strings.Contains(err.Error(), "the sidecar answered 403 same_operator: ") ||
		!strings.Contains(err.Error(), "another operator runs countersign bundle approve DIGEST with their own token") {
		t.Errorf("the uploader's approval: %v\n%s", err, out)
	}
	out, err = runRelease(t, append([]string{"approve", p4Digest, "--json"}, as("ops-ida")...)...)
	var refused struct {
		Error     struct{ Code, Message string }
		RequestID string `json:"request_id"`
	}
	if err == nil || json.Unmarshal([]byte(out), &refused) != nil || refused.Error.Code != "same_operator" || refused.RequestID == "" {
		t.Errorf("the uploader's approval --json: %v, %+v\n%s", err, refused, out)
	}

	// The status shows p4 waiting for the second operator; with the
	// sidecar and the token from the environment.
	t.Setenv(envSidecar, st.Endpoints.Sidecar)
	t.Setenv(envToken, st.Tokens["ops-jon"])
	out, err = runRelease(t, "status")
	flat = strings.Join(strings.Fields(out), " ")
	for _, want := range []string{
		"active: p1 (sha256 " + p1.Digest + ")",
		"awaiting a second operator: p4 (sha256 " + p4Digest + "), uploaded by ops-ida",
		"an operator other than ops-ida runs countersign bundle approve " + p4Digest,
		"SEQ AT REVISION SHA256 STATUS BY NOTE",
		" p4 " + p4Digest[:12] + " awaiting_second_operator ops-ida refund_auto 5000 → 7500",
	} {
		if err != nil || !strings.Contains(flat, want) {
			t.Errorf("status: %v; it lacks %q:\n%s", err, want, out)
		}
	}
	out, err = runRelease(t, "status", "--json")
	_, active := apiCall(t, st, http.MethodGet, "/v1/bundles/active", "ops-ida", nil)
	_, history := apiCall(t, st, http.MethodGet, "/v1/bundles", "ops-ida", nil)
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "status", []byte(out), []byte(`{"active": `+string(active)+`, "history": `+string(history)+`}`))

	// The second operator's approval makes it live.
	out, err = runRelease(t, "approve", p4Digest, "--json")
	if err != nil {
		t.Fatalf("ops-jon's approval: %v\n%s", err, out)
	}
	_, live := apiCall(t, st, http.MethodGet, "/v1/bundles/active", "ops-ida", nil)
	sameJSON(t, "approve", []byte(out), live)
	out, err = runRelease(t, append([]string{"status"}, as("ops-ida")...)...)
	if err != nil || !strings.Contains(out, "active: p4 (sha256 "+p4Digest+")") || !strings.Contains(out, "awaiting a second operator: none") ||
		!strings.Contains(out, "proposed by ops-ida") {
		t.Errorf("status after the approval: %v\n%s", err, out)
	}

	// The diff, by revision, by digest prefix and with a file: the limit.
	for _, pair := range [][2]string{{"p1", "p4"}, {p1.Digest[:12], p4}} {
		out, err = runRelease(t, "diff", pair[0], pair[1])
		flat = strings.Join(strings.Fields(out), " ")
		if err != nil || !strings.Contains(flat, "from p1 (sha256 "+p1.Digest+") to p4 (sha256 "+p4Digest+")") ||
			!strings.Contains(flat, "data diff: data.countersign.limits.refund_auto 5000 → 7500 loosens refund_auto") ||
			strings.Contains(out, "diff ") && strings.Contains(out, ".rego") {
			t.Errorf("diff %s %s: %v\n%s", pair[0], pair[1], err, out)
		}
	}
	out, err = runRelease(t, "diff", "p4", "p1", "--json")
	var d struct {
		From, To struct{ Revision, Digest string }
		Diff     []json.RawMessage
		DataDiff []struct {
			Path, Change string
			Old, New     json.RawMessage
		} `json:"data_diff"`
	}
	if err != nil || json.Unmarshal([]byte(out), &d) != nil || d.From.Digest != p4Digest || d.To.Digest != p1.Digest || len(d.Diff) != 0 ||
		len(d.DataDiff) != 1 || d.DataDiff[0].Change != "tightens" || string(d.DataDiff[0].New) != "5000" {
		t.Errorf("diff p4 p1 --json: %v, %+v\n%s", err, d, out)
	}

	// Back to p1: a pure tightening, live on one operator.
	out, err = runRelease(t, append([]string{"activate", p1.Digest}, as("ops-ida")...)...)
	if err != nil || !strings.Contains(out, "p1 (sha256 "+p1.Digest+") is active, by ops-ida, a rollback") {
		t.Errorf("rollback to p1: %v\n%s", err, out)
	}
	out, err = runRelease(t, "status")
	if err != nil || !strings.Contains(out, "active: p1 (sha256 "+p1.Digest+")") {
		t.Errorf("status after the rollback: %v\n%s", err, out)
	}
}

// upload posts a bundle to the stack's sidecar as who, with query, and
// returns the body, failing unless the status is want.
func upload(t *testing.T, st *devstack.Stack, who, query string, archive []byte, want int) []byte {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, st.Endpoints.Sidecar+"/v1/bundles"+query, bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+st.Tokens[who])
	req.Header.Set("Content-Type", "application/gzip")
	res, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != want {
		t.Fatalf("POST /v1/bundles%s: %d %v, want %d\n%s", query, res.StatusCode, err, want, body)
	}
	return body
}

// Without a sidecar or a token the commands say what to give; a name that
// is no file and no bundle of the history is named.
func TestBundleReleaseRefusals(t *testing.T) {
	t.Setenv(envSidecar, "")
	t.Setenv(envToken, "")
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.jwt")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"no sidecar", nil, []string{"status"}, "say which sidecar: --sidecar URL or COUNTERSIGN_SIDECAR"},
		{"no token", nil, []string{"status", "--sidecar", "http://127.0.0.1:1"}, "give an operator's token: --token-file F, or the token itself in COUNTERSIGN_TOKEN"},
		{"an empty token file", nil, []string{"approve", "abc", "--sidecar", "http://127.0.0.1:1", "--token-file", empty}, "want one bearer token"},
		{"two tokens in the variable", map[string]string{envSidecar: "http://127.0.0.1:1", envToken: "a b"}, []string{"status"}, "COUNTERSIGN_TOKEN: want one bearer token"},
		{"a sidecar URL that is none", map[string]string{envToken: "t"}, []string{"status", "--sidecar", "ftp://x"}, "--sidecar: client: sidecar URL"},
		{"a diff of a name that is no file, without a sidecar", nil, []string{"diff", "p1", filepath.Join(dir, "none.tar.gz")}, "p1 is not a bundle file; to read it from a sidecar, say which sidecar"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			if _, err := runRelease(t, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%v, want %q", err, tc.want)
			}
		})
	}
}

// A sidecar with no bundle active answers 503 not_ready for the active
// one; status still shows the history, where an upload would appear.
func TestBundleStatusWithoutAnActiveBundle(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/bundles/active":
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `{"error": {"code": "not_ready", "message": "no policy bundle is active; an operator must activate one"}, "request_id": "r1"}`)
		case "/v1/bundles":
			io.WriteString(w, `[]`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	t.Setenv(envToken, "t")
	out, err := runRelease(t, "status", "--sidecar", srv.URL)
	if err != nil || !strings.Contains(out, "active: none") || !strings.Contains(out, "awaiting a second operator: none") {
		t.Errorf("status: %v\n%s", err, out)
	}
	out, err = runRelease(t, "status", "--sidecar", srv.URL, "--json")
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "status", []byte(out), []byte(`{"active": null, "history": []}`))
}

// A diff argument names one bundle of the history: a revision two
// bundles carry, or a digest prefix shorter than 8 digits, is refused
// with what to give instead; a digest reads the archive.
func TestBundleDiffNamesOneBundle(t *testing.T) {
	p1, p1Digest := releaseArchive(t, "p1")
	p3, p3Digest := releaseArchive(t, "p3")
	history, err := json.Marshal([]map[string]any{
		{"seq": 1, "revision": "p1", "digest": p1Digest, "status": "superseded", "by": "ops-ida", "at": time.Now(), "failures": nil},
		{"seq": 2, "revision": "p1", "digest": p3Digest, "status": "active", "by": "ops-ida", "at": time.Now(), "failures": nil},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/bundles":
			w.Write(history)
		case "/v1/bundles/" + p1Digest + "/archive":
			w.Write(p1)
		case "/v1/bundles/" + p3Digest + "/archive":
			w.Write(p3)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	t.Setenv(envSidecar, srv.URL)
	t.Setenv(envToken, "t")
	for _, tc := range []struct {
		name, a, b, want string
	}{
		{"a revision two bundles carry", "p1", p3Digest, "p1 names 2 bundles of the sidecar's history (" + p1Digest + ", " + p3Digest + "): give a digest"},
		{"a digest prefix too short", p1Digest[:7], p3Digest, p1Digest[:7] + " is neither a bundle file nor a digest or revision"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := runRelease(t, "diff", tc.a, tc.b); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%v, want %q", err, tc.want)
			}
		})
	}
	out, err := runRelease(t, "diff", p1Digest[:8], p3Digest)
	if err != nil || !strings.Contains(out, "from p1 (sha256 "+p1Digest+")\nto   p3 (sha256 "+p3Digest+")") {
		t.Errorf("diff by digests: %v\n%s", err, out)
	}
}

// releaseArchive is an embedded release's .tar.gz and its digest.
func releaseArchive(t *testing.T, name string) ([]byte, string) {
	t.Helper()
	archive, err := bundles.Archive(name)
	if err != nil {
		t.Fatal(err)
	}
	b, err := policy.LoadArchive(archive)
	if err != nil {
		t.Fatal(err)
	}
	return archive, b.Digest()
}
