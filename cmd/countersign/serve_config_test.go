package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/countersign/countersign/cmd/config"
	"github.com/countersign/countersign/cmd/devstack"
)

// noEnv is an environment without a COUNTERSIGN_* variable.
func noEnv(string) (string, bool) { return "", false }

func envOf(vars map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) { v, ok := vars[name]; return v, ok }
}

func writeText(t *testing.T, name, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// sample is a value of f's type other than its default, as a variable, as
// a YAML value, and as the flag then prints it.
func sample(t *testing.T, f *pflag.Flag) (env, yaml, want string) {
	switch f.Value.Type() {
	case "string":
		return "sample-" + f.Name, `"sample-` + f.Name + `"`, "sample-" + f.Name
	case "bool":
		return "true", "true", "true"
	case "duration":
		return "7s", "7s", "7s"
	case "int":
		return "7", "7", "7"
	case "stringSlice":
		return "https://a.example,https://b.example", "[https://a.example, https://b.example]", "[https://a.example,https://b.example]"
	}
	t.Fatalf("--%s is a %s: give sample a value of that type", f.Name, f.Value.Type())
	return "", "", ""
}

// Every serve flag, those added later included, is set by its
// COUNTERSIGN_* variable and by its key in the config file.
func TestEverySettingHasAVariableAndAKey(t *testing.T) {
	var count int
	newServeCmd().Flags().VisitAll(func(fl *pflag.Flag) {
		count++
		env, yaml, want := sample(t, fl)
		t.Run(config.EnvName(fl.Name), func(t *testing.T) {
			if fl.Name == "config" {
				env = writeText(t, "empty.yaml", "")
				want = env
			}
			var f serveFlags
			fs := newServeCmdFor(&f).Flags()
			settings, _, _ := f.settle(fs, envOf(map[string]string{config.EnvName(fl.Name): env}))
			if got := fs.Lookup(fl.Name).Value.String(); got != want || settings.Origins[fl.Name].Source != config.FromEnv {
				t.Errorf("--%s = %q from %+v, want %q from %s", fl.Name, got, settings.Origins[fl.Name], want, config.EnvName(fl.Name))
			}
		})
		if fl.Name == "config" {
			return // a file cannot name another: TestFileProblems in cmd/config
		}
		t.Run(fl.Name+":", func(t *testing.T) {
			file := writeText(t, "countersign.yaml", fmt.Sprintf("# serve's settings\n%s: %s\n", fl.Name, yaml))
			var f serveFlags
			fs := newServeCmdFor(&f).Flags()
			settings, _, _ := f.settle(fs, envOf(map[string]string{"COUNTERSIGN_CONFIG": file}))
			if got := fs.Lookup(fl.Name).Value.String(); got != want || settings.Origins[fl.Name].Where != file+":2" {
				t.Errorf("--%s = %q from %+v, want %q from %s:2", fl.Name, got, settings.Origins[fl.Name], want, file)
			}
		})
	})
	if count < 25 {
		t.Errorf("visited %d flags of serve, fewer than it has", count)
	}
}

// serve itself reads its variables and its file, a flag winning over a
// variable over the file: each case gives --receiver-clock-skew 0s, which
// serve refuses, one way and a good value the ways it must beat.
func TestServeReadsTheEnvironmentAndTheFile(t *testing.T) {
	zero := writeText(t, "zero.yaml", "receiver-clock-skew: 0s\n")
	good := writeText(t, "good.yaml", "receiver-clock-skew: 5s\n")
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
	}{
		{"from the file named by --config", []string{"--config", zero}, nil},
		{"from the file named by COUNTERSIGN_CONFIG", nil, map[string]string{"COUNTERSIGN_CONFIG": zero}},
		{"from the variable, over the file", []string{"--config", good}, map[string]string{"COUNTERSIGN_RECEIVER_CLOCK_SKEW": "0s"}},
		{"from the flag, over the variable", []string{"--receiver-clock-skew", "0s"}, map[string]string{"COUNTERSIGN_RECEIVER_CLOCK_SKEW": "5s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			cmd := newServeCmd()
			cmd.SetArgs(append([]string{"--dev", "--data", t.TempDir()}, tc.args...))
			cmd.SetOut(io.Discard)
			cmd.SetErr(io.Discard)
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second) // a serve that started ends here
			defer cancel()
			if err := cmd.ExecuteContext(ctx); err == nil || err.Error() != "--receiver-clock-skew 0s must be over zero: no two clocks agree exactly" {
				t.Errorf("serve: %v, want the refusal of --receiver-clock-skew 0s alone", err)
			}
		})
	}
}

// Production serve with nothing set names every missing setting at once,
// how to set each (flag, variable, file key), and the other way out,
// --dev.
func TestServeNamesEverySettingToFix(t *testing.T) {
	var f serveFlags
	fs := newServeCmdFor(&f).Flags()
	_, _, err := f.settle(fs, noEnv)
	if err == nil {
		t.Fatal("serve would start")
	}
	for _, w := range []string{"serve cannot start, 6 settings to fix:", "\n  --data DIR is required", "\n  --agent", "\n  --ledger", "\n  --orders", "\n  --issuer must", "\n  --issuer-jwks",
		"the environment variable COUNTERSIGN_NAME", "the key NAME: of the --config file", "or pass --dev"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%q does not say %q", err, w)
		}
	}
}

// --store-file gives the database URL from a file, trimmed; it is refused
// with --store, empty or missing, and no refusal repeats the URL.
func TestStoreFile(t *testing.T) {
	url := writeText(t, "store", "  postgres://cs:s3cret@db.internal/cs\n")
	empty := writeText(t, "empty", "\n")
	missing := filepath.Join(t.TempDir(), "missing")
	f := serveFlags{storeFile: url}
	if got, err := f.store(); err != nil || got != "postgres://cs:s3cret@db.internal/cs" {
		t.Fatalf("store() = %q, %v", got, err)
	}
	for _, tc := range []struct {
		name string
		f    serveFlags
		says string
	}{
		{"with --store", serveFlags{storeFile: url, storeURL: "postgres://cs:s3cret@db.internal/cs"}, "--store and --store-file are both given"},
		{"an empty file", serveFlags{storeFile: empty}, "--store-file " + empty + " is empty"},
		{"a missing file", serveFlags{storeFile: missing}, "--store-file: open " + missing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.f.store()
			if err == nil || !strings.Contains(err.Error(), tc.says) || strings.Contains(err.Error(), "s3cret") {
				t.Errorf("%v, want a refusal saying %q without the URL", err, tc.says)
			}
		})
	}
	t.Run("serve uses it", func(t *testing.T) {
		var f serveFlags
		fs := newServeCmdFor(&f).Flags()
		_, p, err := f.settle(fs, envOf(map[string]string{"COUNTERSIGN_DEV": "true", "COUNTERSIGN_DATA": t.TempDir(), "COUNTERSIGN_STORE_FILE": url}))
		if err != nil || p.store != "postgres://cs:s3cret@db.internal/cs" || f.storeURL != p.store {
			t.Errorf("settle: %v, store %q, --store %q", err, p.store, f.storeURL)
		}
	})
}

// config check prints every problem of a file at once and exits 1, or
// one line of what the file and the environment set and exits 0; it never
// prints a value.
func TestConfigCheck(t *testing.T) {
	dir := t.TempDir()
	jwks := publicJWKSFile(t)
	secret := writeText(t, "store", "postgres://cs:s3cret@db.internal/cs\n")
	prod := func(extra string) string {
		return fmt.Sprintf("data: %s\nagent: support-agent\nledger: https://ledger.internal\norders: https://orders.internal\nissuer: https://idp.example\nissuer-jwks: %s\nstore-file: %s\n%s", dir, jwks, secret, extra)
	}
	cases := []struct {
		name  string
		text  string
		env   map[string]string
		ok    bool
		lines []string // each printed, in this order
	}{
		{"a production file", prod(""), nil, true,
			[]string{"ok: FILE: production serve, 7 settings from the file (agent, data, issuer, issuer-jwks, ledger, orders, store-file)"}},
		{"a production file and the environment", prod(""), map[string]string{"COUNTERSIGN_LISTEN": "0.0.0.0:8080"}, true,
			[]string{"ok: FILE: production serve, 7 settings from the file (agent, data, issuer, issuer-jwks, ledger, orders, store-file), 1 from the environment (COUNTERSIGN_LISTEN)"}},
		{"a dev file", "dev: true\ndata: " + dir + "\n", nil, true,
			[]string{"ok: FILE: serve --dev, 2 settings from the file (data, dev)"}},
		{"every kind of problem at once", `listn: 0.0.0.0:8080
policy-timeout: 5
store: postgres://cs:s3cret@db.internal/cs
notify-webhook: https://hooks.example/SECRETPATH
issuer-jwks: /nonexistent/jwks.json
key-file: /nonexistent/kek
`, nil, false, []string{
			`FILE:1: unknown key "listn"`,
			"FILE:2: policy-timeout: invalid value: want a duration",
			"--data DIR is required",
			"--notify-webhook needs --notify-webhook-secret-file",
			"--agent must",
			"--ledger must",
			"--orders must",
			"--issuer must",
			"--key-file: ",
			"--issuer-jwks: stat /nonexistent/jwks.json: no such file",
		}},
		{"production settings with dev: true", "dev: true\ndata: " + dir + "\nledger: https://ledger.internal\noidc-client-id: cs\n", nil, false,
			[]string{"--ledger, --oidc-client-id: production flags that --dev would ignore"}},
		{"a bad variable", "dev: true\ndata: " + dir + "\n", map[string]string{"COUNTERSIGN_DEV": "yes"}, false,
			[]string{"COUNTERSIGN_DEV: invalid value: want true or false"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			file := writeText(t, "countersign.yaml", tc.text)
			cmd := &cobra.Command{}
			var out strings.Builder
			cmd.SetOut(&out)
			err := checkConfig(cmd, file, envOf(tc.env))
			if tc.ok != (err == nil) {
				t.Fatalf("config check: %v, printed:\n%s", err, &out)
			}
			if !tc.ok && (exitCode(err) != 1 || err.Error() != fmt.Sprintf("%s: %d problems", file, len(tc.lines)) && len(tc.lines) > 1) {
				t.Errorf("config check: %v (exit %d), want %d problems, exit 1", err, exitCode(err), len(tc.lines))
			}
			printed := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			if len(printed) != len(tc.lines) {
				t.Errorf("%d lines, want %d:\n%s", len(printed), len(tc.lines), &out)
			}
			for i, w := range tc.lines {
				w = strings.ReplaceAll(w, "FILE", file)
				if i < len(printed) && !strings.Contains(printed[i], w) {
					t.Errorf("line %d %q does not say %q", i+1, printed[i], w)
				}
			}
			for _, secret := range []string{"s3cret", "SECRETPATH"} {
				if strings.Contains(out.String(), secret) || (err != nil && strings.Contains(err.Error(), secret)) {
					t.Errorf("config check printed a secret:\n%s", &out)
				}
			}
		})
	}
	t.Run("as countersign config check", func(t *testing.T) {
		_, err := runRoot(t, "config", "check", filepath.Join(dir, "missing.yaml"))
		if err == nil || exitCode(err) != 1 {
			t.Errorf("a missing file: %v", err)
		}
	})
}

// healthcheck, as the image's HEALTHCHECK runs it (no --addr), asks the
// address the config file gives serve when COUNTERSIGN_LISTEN does not.
func TestHealthcheckFollowsTheConfigFile(t *testing.T) {
	dev, err := devstack.Start(context.Background(), devstack.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	t.Setenv("COUNTERSIGN_LISTEN", "")
	t.Setenv("COUNTERSIGN_CONFIG", writeText(t, "countersign.yaml", "listen: "+strings.TrimPrefix(dev.Endpoints.Sidecar, "http://")+"\n"))
	if out, err := runRoot(t, "healthcheck"); err != nil || strings.TrimSpace(out) != "ready" {
		t.Errorf("healthcheck: %v, printed %q", err, out)
	}
}
