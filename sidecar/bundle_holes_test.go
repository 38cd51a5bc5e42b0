package sidecar_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/countersign/countersign/bundles"
	"github.com/countersign/countersign/cmd/devstack"
	"github.com/countersign/countersign/executor/policy"
)

// p1Edited is bundle p1's files under revision rev, with call.rego passed
// through edit and extra files added or replaced.
func p1Edited(t *testing.T, rev string, edit func(string) string, extra map[string]string) fstest.MapFS {
	t.Helper()
	fsys, err := bundles.Variant("p1", rev, edit, extra)
	if err != nil {
		t.Fatal(err)
	}
	return fsys
}

// appendRego adds rules to call.rego.
func appendRego(rules string) func(string) string {
	return func(src string) string { return src + "\n" + rules + "\n" }
}

func packed(t *testing.T, fsys fs.FS) []byte {
	t.Helper()
	b, err := policy.Build(fsys)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// uploadAs posts body to /v1/bundles as operator ops-ida.
func (e *env) uploadAs(t *testing.T, query string, body io.Reader) reply {
	t.Helper()
	h := http.Header{"Authorization": {"Bearer " + e.st.Tokens["ops-ida"]}, "Content-Type": {"application/gzip"}}
	return e.send(t, http.MethodPost, "/v1/bundles"+query, h, body)
}

// activateByTwo uploads archive as ops-ida and has ops-jon approve it: a
// bundle that changes rules is never a pure tightening, so one operator's
// upload waits for a second.
func (e *env) activateByTwo(t *testing.T, archive []byte) {
	t.Helper()
	r := e.uploadAs(t, "", bytes.NewReader(archive))
	r.want(t, http.StatusAccepted, "")
	var aw struct{ Digest string }
	r.decode(t, &aw)
	e.call(t, http.MethodPost, "/v1/bundles/"+aw.Digest+"/approve", "ops-jon", nil).want(t, http.StatusCreated, "")
}

// bundleHistory maps each revision to its statuses, in order.
func (e *env) bundleHistory(t *testing.T) map[string]string {
	t.Helper()
	var h []bundleRecord
	e.call(t, http.MethodGet, "/v1/bundles", "ops-ida", nil).decode(t, &h)
	out := map[string]string{}
	for _, b := range h {
		out[b.Revision] += b.Status + " "
	}
	return out
}

// requestCounter is a loopback HTTP listener that counts what reaches it.
func requestCounter(t *testing.T) (string, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n.Add(1)
		w.Write([]byte(`{}`))
	}))
	t.Cleanup(srv.Close)
	return srv.URL, &n
}

// A bundle that reaches outside (http.send, time.now_ns) is refused with
// the built-in and the file named, even with break glass, recorded as
// rejected, and sends nothing; a bundle without tests is refused too. p1
// stays in force throughout.
func TestBundleRefusals(t *testing.T) {
	e := start(t, devstack.Options{})
	url, hits := requestCounter(t)
	leak := appendRego(fmt.Sprintf(`within_auto_refund if {
	http.send({"method": "POST", "url": %q, "body": input, "timeout": "1s"}).status_code == 999
}`, url))
	clock := appendRego(`within_auto_refund if {
	input.args.amount == 20000
	time.now_ns() > 1700000001000000000
}`)
	leakyTest := map[string]string{"call/leak_test.rego": fmt.Sprintf(
		"package countersign.leak_test\n\ntest_leak if http.send({\"method\": \"GET\", \"url\": %q}).status_code == 200\n", url)}
	untested := p1Edited(t, "untested", func(s string) string { return s }, nil)
	delete(untested, "call/call_test.rego")
	delete(untested, "approver/approver_test.rego")

	tests := []struct {
		name   string
		fsys   fs.FS
		query  string
		code   string
		naming []string
	}{
		{"a rule posts every input out", p1Edited(t, "leaky", leak, nil), "", "bundle_forbidden_builtin", []string{"http.send", "/call/call.rego"}},
		{"break glass does not let it in", p1Edited(t, "leaky-bg", leak, nil), "?break_glass=true&reason=drill", "bundle_forbidden_builtin", []string{"http.send", "/call/call.rego"}},
		{"a test posts out during the gate", p1Edited(t, "leaky-test", func(s string) string { return s }, leakyTest), "", "bundle_forbidden_builtin", []string{"http.send", "/call/leak_test.rego"}},
		{"a rule reads the clock", p1Edited(t, "clock", clock, nil), "", "bundle_forbidden_builtin", []string{"time.now_ns", "/call/call.rego"}},
		{"a bundle without tests", untested, "", "bundle_without_tests", []string{"test"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.uploadAs(t, tt.query, bytes.NewReader(packed(t, tt.fsys)))
			r.want(t, http.StatusUnprocessableEntity, tt.code)
			msg := r.errorOf(t).Message
			for _, s := range tt.naming {
				if !strings.Contains(msg, s) {
					t.Errorf("message %q does not name %q", msg, s)
				}
			}
		})
	}
	h := e.bundleHistory(t)
	for _, rev := range []string{"leaky", "leaky-bg", "leaky-test", "clock", "untested"} {
		if h[rev] != "rejected " {
			t.Errorf("history of %s: %q, want rejected", rev, h[rev])
		}
	}
	if h["p1"] != "active " {
		t.Errorf("history of p1: %q, want active", h["p1"])
	}
	// Decisions under p1 still work and nothing was sent anywhere.
	e.open(t, "rep-ana", "W-after-refusals")
	r, s := e.propose(t, "rep-ana", "W-after-refusals", "issue_refund", refund("O-1001", 2000))
	if r.status != http.StatusOK || s.Decision != "ALLOW" {
		t.Errorf("a refund under p1: %d %s", r.status, r.body)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the listener got %d requests", n)
	}
}

// A bundle that spins on one amount passes the gate (no case or test uses
// that amount); a refund of it answers 503 policy_timeout near the 100 ms
// deadline, and another rep's lookup meanwhile is not held for seconds.
func TestSpinningPolicyTimesOut(t *testing.T) {
	e := start(t, devstack.Options{PolicyTimeout: policy.DefaultTimeout})
	spin := func(src string) string {
		src = strings.Replace(src, "amount_within_max if {\n", "amount_within_max if {\n\tnot spins\n", 1)
		return src + `
spins if {
	input.args.amount == 31337
	some i in numbers.range(1, 7000)
	some j in numbers.range(1, 7000)
	i * j < 0
}
`
	}
	e.activateByTwo(t, packed(t, p1Edited(t, "spin", spin, nil)))
	e.open(t, "rep-ana", "W-spin")
	e.open(t, "rep-ben", "W-lookup")

	var wg sync.WaitGroup
	var spun reply
	var spinTook time.Duration
	wg.Go(func() {
		began := time.Now()
		spun, _ = e.propose(t, "rep-ana", "W-spin", "issue_refund", refund("O-1001", 31337))
		spinTook = time.Since(began)
	})
	var lookupTook time.Duration
	var looked reply
	wg.Go(func() {
		began := time.Now()
		looked, _ = e.propose(t, "rep-ben", "W-lookup", "lookup_order", map[string]any{"order": "O-1004"})
		lookupTook = time.Since(began)
	})
	wg.Wait()
	// Without the deadline the spin runs for minutes and the test times
	// out; the durations are logged, not asserted (a loaded machine is slow).
	spun.want(t, http.StatusServiceUnavailable, "policy_timeout")
	looked.want(t, http.StatusOK, "")
	t.Logf("the spinning decision answered 503 after %v; the other rep's lookup 200 after %v", spinTook, lookupTook)
	// Another amount is decided as p1 would.
	r, s := e.propose(t, "rep-ana", "W-spin", "issue_refund", refund("O-1001", 2000))
	if r.status != http.StatusOK || s.Decision != "ALLOW" {
		t.Errorf("a $20.00 refund under the spinning bundle: %d %s", r.status, r.body)
	}
	e.wantLedger(t, 1)
}

// tarGzOf packs entries written by fill into a .tar.gz.
func tarGzOf(t *testing.T, fill func(tw *tar.Writer) error) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	if err := fill(tw); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// onlyReader hides a reader's length, so the request is sent chunked.
type onlyReader struct{ io.Reader }

// Oversized uploads and decompression bombs answer 413 bundle_too_large;
// malformed revisions, including one shaped like a token, 422 invalid_bundle.
func TestBundleUploadBounds(t *testing.T) {
	e := start(t, devstack.Options{})
	oversized := make([]byte, policy.MaxArchiveBytes+1)
	rand.Read(oversized)
	zeros := tarGzOf(t, func(tw *tar.Writer) error {
		size := int64(policy.MaxUnpackedBytes + 1)
		if err := tw.WriteHeader(&tar.Header{Name: "data.json", Mode: 0o644, Size: size, Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err := io.Copy(tw, io.LimitReader(zeroReader{}, size))
		return err
	})
	dirs := tarGzOf(t, func(tw *tar.Writer) error {
		for i := range 10000 {
			if err := tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("d%d/", i), Mode: 0o755, Typeflag: tar.TypeDir}); err != nil {
				return err
			}
		}
		return nil
	})
	// Plain zeros, gzipped: to a tar reader an empty archive that ends at
	// once, so only reading the gzip stream to its end finds the bomb.
	var plain bytes.Buffer
	gz := gzip.NewWriter(&plain)
	if _, err := io.Copy(gz, io.LimitReader(zeroReader{}, 8*policy.MaxUnpackedBytes)); err != nil || gz.Close() != nil {
		t.Fatal(err)
	}
	revision := func(rev string) []byte {
		return packed(t, p1Edited(t, rev, func(s string) string { return s }, nil))
	}
	tests := []struct {
		name   string
		body   io.Reader
		status int
		code   string
	}{
		{"an upload over 1 MiB", bytes.NewReader(oversized), http.StatusRequestEntityTooLarge, "bundle_too_large"},
		{"an upload over 1 MiB sent chunked", onlyReader{bytes.NewReader(oversized)}, http.StatusRequestEntityTooLarge, "bundle_too_large"},
		{"a small archive of zeros that unpacks past 4 MiB", bytes.NewReader(zeros), http.StatusRequestEntityTooLarge, "bundle_too_large"},
		{"gzipped zeros, no tar at all, unpacking past 4 MiB", bytes.NewReader(plain.Bytes()), http.StatusRequestEntityTooLarge, "bundle_too_large"},
		{"a small archive of 10,000 directory entries", bytes.NewReader(dirs), http.StatusRequestEntityTooLarge, "bundle_too_large"},
		{"a revision with a space", bytes.NewReader(revision("p 4")), http.StatusUnprocessableEntity, "invalid_bundle"},
		{"a revision that climbs", bytes.NewReader(revision("../p4")), http.StatusUnprocessableEntity, "invalid_bundle"},
		{"a revision of 65 characters", bytes.NewReader(revision(strings.Repeat("p", 65))), http.StatusUnprocessableEntity, "invalid_bundle"},
		{"a revision shaped like a token", bytes.NewReader(revision("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln")), http.StatusUnprocessableEntity, "invalid_bundle"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.uploadAs(t, "", tt.body).want(t, tt.status, tt.code)
		})
	}
	if len(zeros) > policy.MaxArchiveBytes || len(dirs) > policy.MaxArchiveBytes {
		t.Errorf("the bombs are %d and %d bytes packed; they should pass the upload bound", len(zeros), len(dirs))
	}
	// A well-formed dotted revision is fine, and the limits are the same
	// for the JSON endpoints as before.
	e.uploadAs(t, "", bytes.NewReader(revision("2025.06.01-p4"))).want(t, http.StatusCreated, "")
	big := strings.NewReader(`{"ticket": "` + strings.Repeat("x", 2<<20) + `"}`)
	h := http.Header{"Authorization": {"Bearer " + e.st.Tokens["rep-ana"]}, "Content-Type": {"application/json"}}
	e.send(t, http.MethodPost, "/v1/workflows", h, big).want(t, http.StatusRequestEntityTooLarge, "body_too_large")
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
