package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/countersign/countersign/cmd/devstack"
)

// The command says what to fix before it serves anything: flags that do
// not go together, a token file it cannot use, a sidecar it cannot reach
// or that refuses the token.
func TestMCPCommandRefuses(t *testing.T) {
	st, err := devstack.Start(context.Background(), devstack.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good, empty, two, bad := file("good.jwt", st.Tokens["rep-ana"]), file("empty.jwt", "\n"), file("two.jwt", "a b"), file("bad.jwt", "not-a-jwt")
	url := st.Endpoints.Sidecar
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"no sidecar", []string{"--token-file", good}, `"sidecar"`},
		{"no token file", []string{"--sidecar", url}, `"token-file"`},
		{"a token file that is not there", []string{"--sidecar", url, "--token-file", filepath.Join(dir, "missing")}, "--token-file: open"},
		{"an empty token file", []string{"--sidecar", url, "--token-file", empty}, "want one bearer token"},
		{"two words in the token file", []string{"--sidecar", url, "--token-file", two}, "want one bearer token"},
		{"a workflow without a ticket", []string{"--sidecar", url, "--token-file", good, "--workflow", "W1"}, "--workflow needs --ticket"},
		{"a lead with a workflow", []string{"--sidecar", url, "--token-file", good, "--lead", "--ticket", "T-1"}, "leave out --workflow and --ticket"},
		{"a sidecar URL without a scheme", []string{"--sidecar", "127.0.0.1:8080", "--token-file", good}, "--sidecar: client: sidecar URL"},
		{"a sidecar that is not there", []string{"--sidecar", "http://127.0.0.1:1", "--token-file", good}, "reaching the sidecar at http://127.0.0.1:1"},
		{"a token the sidecar refuses", []string{"--sidecar", url, "--token-file", bad}, "refused the token of " + bad},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := newRootCmd()
			root.SetArgs(append([]string{"mcp"}, c.args...))
			root.SetOut(new(strings.Builder))
			root.SetErr(new(strings.Builder))
			err := root.ExecuteContext(context.Background())
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one saying %q", err, c.want)
			}
		})
	}
}
