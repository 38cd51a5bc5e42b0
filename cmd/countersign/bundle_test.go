package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/countersign/countersign/bundles"
	"github.com/countersign/countersign/bundles/loosen"
	"github.com/countersign/countersign/executor/policy"
)

func runBundle(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newBundleCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

func TestBundleTest(t *testing.T) {
	p2 := filepath.Join(t.TempDir(), "p2.tar.gz")
	archive, err := bundles.Archive("p2")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p2, archive, 0o644); err != nil {
		t.Fatal(err)
	}
	p2Failures := []string{
		"limit_change_undeclared expected refund_auto 5000 got refund_auto 500000 (undeclared)",
		"limit_change_undeclared expected refund_max 50000 got refund_max 5000000 (undeclared)",
		"$51.00 expected REQUIRE_APPROVAL (R7-refund-needs-approval) got ALLOW",
		"$500.00 expected REQUIRE_APPROVAL (R7-refund-needs-approval) got ALLOW",
		"$501.00 expected DENY (R3-refund-over-ceiling) got ALLOW",
	}
	tests := []struct {
		args     []string
		exit     int // 0 when the command succeeds
		failures []string
	}{
		{args: []string{"p1"}},
		{args: []string{p2}, exit: 1, failures: p2Failures},
		{args: []string{"p2"}, exit: 1, failures: p2Failures}, // the embedded release
		{args: []string{"p3"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			out, err := runBundle(t, append([]string{"test"}, tt.args...)...)
			if got := exitOf(err); got != tt.exit {
				t.Fatalf("exit %d (%v), want %d\n%s", got, err, tt.exit, out)
			}
			if got := failingLines(out); !equalContaining(got, tt.failures) {
				t.Errorf("failing lines:\n%s\nwant lines containing:\n%s", strings.Join(got, "\n"), strings.Join(tt.failures, "\n"))
			}
			if !strings.Contains(out, "rego tests: 71 passed, 0 failed") {
				t.Errorf("no Rego test summary:\n%s", out)
			}
		})
	}
}

// bundle test shows the review a second operator would read: a release
// with p1's rules and limits is a pure tightening of the baseline; the
// rep-ana rule passes the gate and is not, and its review names it.
func TestBundleTestShowsTheReview(t *testing.T) {
	out, err := runBundle(t, "test", "p3")
	if err != nil || !strings.Contains(out, "\nreview against p1 (sha256 ") || !strings.Contains(out, "second operator: not needed, a pure tightening") ||
		!strings.Contains(out, "new allowances: none; the candidate has the rules and data of the bundle it replaces") {
		t.Errorf("p3: %v\n%s", err, out)
	}
	ana := filepath.Join(t.TempDir(), "ana.tar.gz")
	writeBundle(t, ana, loosen.AllowAnaOnO1002)
	out, err = runBundle(t, "test", ana)
	if err != nil {
		t.Fatalf("the rep-ana rule passes the gate: %v\n%s", err, out)
	}
	for _, want := range []string{
		"second operator: needed, it is not a pure tightening:\n  Rego module /call/call.rego is changed\n",
		"diff /call/call.rego modified (the rules change):\n--- a/call/call.rego\n+++ b/call/call.rego\n@@ ",
		"+\tinput.args.amount >= 45000\n",
		"  call by rep-ana (EU) issue_refund O-1002 (EU, paid $510.00) $450.00: REQUIRE_APPROVAL (R7-refund-needs-approval) → ALLOW (default-allow-after-checks)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the review lacks %q:\n%s", want, out)
		}
	}
}

// failingLines are the FAIL lines of bundle test's table, with runs of
// blanks made one.
func failingLines(out string) []string {
	var failed []string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "FAIL  ") {
			failed = append(failed, strings.Join(strings.Fields(line), " "))
		}
	}
	return failed
}

func equalContaining(got, want []string) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range want {
		if !strings.Contains(got[i], want[i]) {
			return false
		}
	}
	return true
}

// writeData writes p1's data with refund_auto set to auto.
func writeData(t *testing.T, auto int) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "data.json")
	data := fmt.Sprintf(`{"countersign": {"limits": {"refund_auto": %d, "refund_max": 50000, "reship_approval_value": 30000,
		"rep_daily": 100000, "rep_window_seconds": 86400, "agent_hourly": 300000, "approval_ttl_seconds": 900, "token_ttl_seconds": 60}}}`, auto)
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// A new revision is one command from rego/ and a data file; its declared
// limit change passes the gate, left undeclared it fails it.
func TestBundleBuildRevision(t *testing.T) {
	dir := t.TempDir()
	rego := filepath.Join("..", "..", "rego")
	data := writeData(t, 7500)
	declared := filepath.Join(dir, "p4.tar.gz")
	out, err := runBundle(t, "build", "--revision", "p4", "--rego", rego, "--data", data, "--limit-change", "refund_auto:5000:7500", "-o", declared)
	if err != nil || !strings.Contains(out, "wrote "+declared+": revision p4, sha256 ") {
		t.Fatalf("build: %v\n%s", err, out)
	}
	b, err := policy.LoadFile(declared)
	if err != nil {
		t.Fatal(err)
	}
	if want := []policy.LimitChange{{Name: "refund_auto", From: 5000, To: 7500}}; !slices.Equal(b.LimitChanges(), want) {
		t.Errorf("declared %v, want %v", b.LimitChanges(), want)
	}
	for _, against := range []string{"p1", "p3"} {
		out, err = runBundle(t, "test", "--against", against, declared)
		if err != nil || !strings.Contains(out, "declared change: refund_auto 5000 → 7500") || !strings.Contains(out, "$76.00") {
			t.Errorf("test --against %s: %v\n%s", against, err, out)
		}
	}

	// With p4 active, p3's $50 is a change p3 does not declare.
	out, err = runBundle(t, "test", "--against", declared, "p3")
	if exitOf(err) != 1 || !slices.Contains(failingLines(out), "FAIL limit_change_undeclared expected refund_auto 7500 got refund_auto 5000 (undeclared)") {
		t.Errorf("p3 against p4: exit %d, want 1 with refund_auto undeclared\n%s", exitOf(err), out)
	}

	// Built as if p4 were active, the bundle declares nothing; tested
	// against p1 it fails, and bundle test names the flag to build with.
	undeclared := filepath.Join(dir, "p4-undeclared.tar.gz")
	if _, err := runBundle(t, "build", "--revision", "p4", "--rego", rego, "--data", data, "--against", declared, "-o", undeclared); err != nil {
		t.Fatal(err)
	}
	out, err = runBundle(t, "test", undeclared)
	if exitOf(err) != 1 || !strings.Contains(out, "limit_change_undeclared") ||
		!strings.Contains(out, "to declare the limit changes against p1, build with --limit-change refund_auto:5000:7500\n") {
		t.Errorf("undeclared: exit %d, want 1 with limit_change_undeclared and the flag to add\n%s", exitOf(err), out)
	}

	refused := []struct {
		args []string
		say  string
	}{
		{[]string{"--data", data}, "or --revision"},
		{[]string{"--revision", "p4", "--rego", rego, "--data", data, "--limit-change", "refund_auto=7500"}, "NAME:FROM:TO"},
		{[]string{"--revision", "p4", "--rego", rego, "--data", data, "--limit-change", "refund_auto:5000:8000"}, "holds 7500"},
		{[]string{"--revision", "p4", "--rego", dir, "--data", data}, "no .rego files"},
		{[]string{rego, "--revision", "p4"}, "without DIR"},
	}
	for _, r := range refused {
		_, err := runBundle(t, append(append([]string{"build"}, r.args...), "-o", filepath.Join(dir, "x.tar.gz"))...)
		if err == nil || !strings.Contains(err.Error(), r.say) {
			t.Errorf("build %q: %v, want an error saying %q", r.args, err, r.say)
		}
	}
}

// A new revision whose limit changes are not declared exactly as they are
// against the bundle that will be active is not written: the error names
// every --limit-change to build with.
func TestBundleBuildNamesTheLimitChanges(t *testing.T) {
	dir := t.TempDir()
	rego := filepath.Join("..", "..", "rego")
	p4 := filepath.Join(dir, "p4.tar.gz")
	if _, err := runBundle(t, "build", "--revision", "p4", "--rego", rego, "--data", writeData(t, 7500), "--limit-change", "refund_auto:5000:7500", "-o", p4); err != nil {
		t.Fatal(err)
	}
	twoChanges := filepath.Join(t.TempDir(), "data.json")
	if err := os.WriteFile(twoChanges, []byte(`{"countersign": {"limits": {"refund_auto": 7500, "refund_max": 40000, "reship_approval_value": 30000,
		"rep_daily": 100000, "rep_window_seconds": 86400, "agent_hourly": 300000, "approval_ttl_seconds": 900, "token_ttl_seconds": 60}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		say  string // "" when the build succeeds
	}{
		{"a raise left undeclared", []string{"--data", writeData(t, 7500)},
			"p1 has refund_auto 5000, the data refund_auto 7500 (undeclared); build with --limit-change refund_auto:5000:7500"},
		{"two changes, one declared", []string{"--data", twoChanges, "--limit-change", "refund_auto:5000:7500"},
			"build with --limit-change refund_auto:5000:7500 --limit-change refund_max:50000:40000"},
		{"a change declared from another value", []string{"--data", writeData(t, 7500), "--limit-change", "refund_auto:6000:7500"},
			"the data refund_auto 7500 (declared from 6000); build with --limit-change refund_auto:5000:7500"},
		{"a change declared that the active bundle already has", []string{"--data", writeData(t, 7500), "--limit-change", "refund_auto:5000:7500", "--against", p4},
			"build with no --limit-change"},
		{"a cut back from the active bundle left undeclared", []string{"--data", writeData(t, 5000), "--against", p4},
			"p4 has refund_auto 7500, the data refund_auto 5000 (undeclared); build with --limit-change refund_auto:7500:5000"},
		{"rego/data.json, the limits in force", nil, ""},
		{"the cut back declared", []string{"--data", writeData(t, 5000), "--against", p4, "--limit-change", "refund_auto:7500:5000"}, ""},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(dir, fmt.Sprintf("%d.tar.gz", i))
			_, err := runBundle(t, append(append([]string{"build", "--revision", "p5", "--rego", rego}, tt.args...), "-o", out)...)
			_, statErr := os.Stat(out)
			switch {
			case tt.say == "" && err != nil:
				t.Fatalf("build: %v", err)
			case tt.say != "" && (err == nil || !strings.Contains(err.Error(), tt.say)):
				t.Fatalf("build: %v, want an error saying %q", err, tt.say)
			case tt.say != "" && statErr == nil:
				t.Errorf("a refused build wrote %s", out)
			}
		})
	}
}

// Without --data a new revision takes rego/data.json.
func TestBundleBuildTakesTheSourceData(t *testing.T) {
	out := filepath.Join(t.TempDir(), "p4.tar.gz")
	if _, err := runBundle(t, "build", "--revision", "p4", "-o", out, "--rego", filepath.Join("..", "..", "rego")); err != nil {
		t.Fatal(err)
	}
	b, err := policy.LoadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join("..", "..", "rego", "data.json"))
	if err != nil {
		t.Fatal(err)
	}
	if canonical(t, b.Data()) != canonical(t, want) {
		t.Errorf("data.json of the bundle:\n%s\nwant rego/data.json:\n%s", b.Data(), want)
	}
}

// canonical is a JSON document with its members sorted and no spaces.
func canonical(t *testing.T, doc []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func TestBundleBuildIsDeterministic(t *testing.T) {
	dir := t.TempDir()
	files, err := bundles.Open("p1")
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(dir, "p1")
	if err := os.CopyFS(src, files); err != nil {
		t.Fatal(err)
	}
	data := writeData(t, 5000)
	build := map[string][]string{
		"a.tar.gz": {src}, "b.tar.gz": {src},
		"c.tar.gz": {"--revision", "p4", "--rego", filepath.Join("..", "..", "rego"), "--data", data},
		"d.tar.gz": {"--revision", "p4", "--rego", filepath.Join("..", "..", "rego"), "--data", data},
	}
	archives := map[string][]byte{}
	for name, args := range build {
		out := filepath.Join(dir, name)
		if _, err := runBundle(t, append(append([]string{"build"}, args...), "-o", out)...); err != nil {
			t.Fatal(err)
		}
		if archives[name], err = os.ReadFile(out); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(archives["a.tar.gz"], archives["b.tar.gz"]) || !bytes.Equal(archives["c.tar.gz"], archives["d.tar.gz"]) {
		t.Fatal("two builds of the same files differ")
	}
	release, err := bundles.Archive("p1")
	if err != nil || !bytes.Equal(archives["a.tar.gz"], release) {
		t.Errorf("the files of release p1 do not build into it (%v)", err)
	}
	for _, name := range []string{"a.tar.gz", "c.tar.gz"} {
		if out, err := runBundle(t, "test", filepath.Join(dir, name)); err != nil {
			t.Fatalf("%s fails the gate: %v\n%s", name, err, out)
		}
	}
	if _, err := runBundle(t, "build", filepath.Join(dir, "missing"), "-o", filepath.Join(dir, "e.tar.gz")); err == nil {
		t.Error("built a missing directory")
	}
}

// --signing-key signs in OPA's format, for the key id given.
func TestBundleBuildSigned(t *testing.T) {
	dir := t.TempDir()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalECPrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "key.pem")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&priv.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "p4.tar.gz")
	if _, err := runBundle(t, "build", "--revision", "p4", "--rego", filepath.Join("..", "..", "rego"), "--data", writeData(t, 5000),
		"--signing-key", keyFile, "--signing-key-id", "ops-2026", "-o", out); err != nil {
		t.Fatal(err)
	}
	archive, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	v, err := policy.NewVerifier(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), "ops-2026")
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Verify(archive); err != nil {
		t.Errorf("signed build: %v", err)
	}
	if _, err := runBundle(t, "build", "--revision", "p4", "--rego", filepath.Join("..", "..", "rego"), "--data", writeData(t, 5000),
		"--signing-key", filepath.Join(dir, "missing.pem"), "-o", out); err == nil {
		t.Error("built with a missing signing key")
	}
}

func exitOf(err error) int {
	if err == nil {
		return 0
	}
	return exitCode(err)
}

// A bundle the gate refuses outright (a forbidden built-in, no tests) is a
// failed gate, exit 1, with the reason on the output; build will not pack
// one that calls a forbidden built-in.
func TestBundleTestRefusals(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		say   string
	}{
		{"forbidden built-in", map[string]string{"call/call.rego": "package countersign.call\n\ndecision := {\"decision\": \"ALLOW\", \"rule\": \"x\"} if time.now_ns() > 0\n",
			"call/call_test.rego": "package countersign.call_test\n\ntest_x if true\n"}, "time.now_ns in /call/call.rego:3"},
		{"no tests", map[string]string{"call/call.rego": "package countersign.call\n\ndecision := {\"decision\": \"DENY\", \"rule\": \"x\"}\n"}, "no Rego tests"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			files := map[string]string{
				".manifest": `{"revision": "x1", "roots": ["countersign"], "rego_version": 1}`,
				"data.json": `{"countersign": {"limits": {"refund_auto": 5000, "refund_max": 50000, "reship_approval_value": 30000,
					"rep_daily": 100000, "rep_window_seconds": 86400, "agent_hourly": 300000, "approval_ttl_seconds": 900, "token_ttl_seconds": 60}}}`,
			}
			for k, v := range tt.files {
				files[k] = v
			}
			for name, body := range files {
				p := filepath.Join(dir, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			out, err := runBundle(t, "test", dir)
			if exitOf(err) != 1 || !strings.Contains(out, "FAIL: bundle x1 refused") || !strings.Contains(out, tt.say) {
				t.Errorf("exit %d (%v), want 1 saying %q:\n%s", exitOf(err), err, tt.say, out)
			}
			if tt.name == "forbidden built-in" {
				if _, err := runBundle(t, "build", dir, "-o", filepath.Join(t.TempDir(), "x.tar.gz")); err == nil || !strings.Contains(err.Error(), "time.now_ns") {
					t.Errorf("build: %v, want a refusal naming time.now_ns", err)
				}
			}
		})
	}
}
