package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	tests := []struct {
		path     string
		exit     int // 0 when the command succeeds
		failures []string
	}{
		{path: filepath.Join("..", "..", "bundles", "p1")},
		{path: filepath.Join("..", "..", "bundles", "p2"), exit: 1, failures: []string{
			"$51.00 expected REQUIRE_APPROVAL (R7-refund-needs-approval) got ALLOW",
			"$500.00 expected REQUIRE_APPROVAL (R7-refund-needs-approval) got ALLOW",
			"$501.00 expected DENY (R3-refund-over-ceiling) got ALLOW",
		}},
		{path: filepath.Join("..", "..", "bundles", "p3")},
		{path: "p2", exit: 1, failures: make([]string, 3)}, // the embedded copy
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			out, err := runBundle(t, "test", tt.path)
			if got := exitOf(err); got != tt.exit {
				t.Fatalf("exit %d (%v), want %d\n%s", got, err, tt.exit, out)
			}
			var failed []string
			for _, line := range strings.Split(out, "\n") {
				if strings.HasPrefix(line, "FAIL  ") {
					failed = append(failed, strings.Join(strings.Fields(line), " "))
				}
			}
			if len(failed) != len(tt.failures) {
				t.Fatalf("%d failing lines, want %d:\n%s", len(failed), len(tt.failures), out)
			}
			for i, want := range tt.failures {
				if !strings.Contains(failed[i], want) {
					t.Errorf("line %q does not contain %q", failed[i], want)
				}
			}
			if !strings.Contains(out, "rego tests: 71 passed, 0 failed") {
				t.Errorf("no Rego test summary:\n%s", out)
			}
		})
	}
}

func TestBundleBuildIsDeterministic(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join("..", "..", "bundles", "p1")
	var archives [][]byte
	for _, name := range []string{"a.tar.gz", "b.tar.gz"} {
		out := filepath.Join(dir, name)
		if _, err := runBundle(t, "build", src, "-o", out); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		archives = append(archives, b)
	}
	if !bytes.Equal(archives[0], archives[1]) {
		t.Fatal("two builds of the same directory differ")
	}
	if out, err := runBundle(t, "test", filepath.Join(dir, "a.tar.gz")); err != nil {
		t.Fatalf("built archive fails the gate: %v\n%s", err, out)
	}
	if _, err := runBundle(t, "build", filepath.Join(dir, "missing"), "-o", filepath.Join(dir, "c.tar.gz")); err == nil {
		t.Error("built a missing directory")
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
