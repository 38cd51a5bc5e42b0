package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/countersign/countersign/cmd/config"
)

// flags is a small command line of each kind of flag serve has.
func flags() *pflag.FlagSet {
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	fs.String("config", "", "")
	fs.String("listen", "127.0.0.1:0", "")
	fs.String("issuer-jwks", "", "")
	fs.Bool("dev", false, "")
	fs.Duration("policy-timeout", 100*time.Millisecond, "")
	fs.StringSlice("mcp-allowed-origins", nil, "")
	fs.Bool("help", false, "")
	return fs
}

func env(vars map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) { v, ok := vars[name]; return v, ok }
}

func writeFile(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "countersign.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestEnvName(t *testing.T) {
	for flag, want := range map[string]string{
		"store":               "COUNTERSIGN_STORE",
		"issuer-jwks":         "COUNTERSIGN_ISSUER_JWKS",
		"mcp-allowed-origins": "COUNTERSIGN_MCP_ALLOWED_ORIGINS",
	} {
		if got := config.EnvName(flag); got != want {
			t.Errorf("EnvName(%q) = %q, want %q", flag, got, want)
		}
	}
}

// A flag wins over its variable, which wins over the file, which wins over
// the default; Origins says which one gave each value.
func TestPrecedence(t *testing.T) {
	file := writeFile(t, "listen: 10.0.0.1:8080\n")
	cases := []struct {
		name   string
		args   []string
		env    map[string]string
		want   string
		source config.Source
	}{
		{"the default alone", nil, nil, "127.0.0.1:0", 0},
		{"the file over the default", []string{"--config", file}, nil, "10.0.0.1:8080", config.FromFile},
		{"the variable over the file", []string{"--config", file}, map[string]string{"COUNTERSIGN_LISTEN": "10.0.0.2:8080"}, "10.0.0.2:8080", config.FromEnv},
		{"the flag over the variable and the file", []string{"--config", file, "--listen", "10.0.0.3:8080"}, map[string]string{"COUNTERSIGN_LISTEN": "10.0.0.2:8080"}, "10.0.0.3:8080", config.FromFlag},
		{"COUNTERSIGN_CONFIG names the file", nil, map[string]string{"COUNTERSIGN_CONFIG": file}, "10.0.0.1:8080", config.FromFile},
		{"an empty variable is unset", []string{"--config", file}, map[string]string{"COUNTERSIGN_LISTEN": ""}, "10.0.0.1:8080", config.FromFile},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := flags()
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			s, err := config.Load(fs, "config", env(tc.env))
			if err != nil {
				t.Fatal(err)
			}
			if got := fs.Lookup("listen").Value.String(); got != tc.want {
				t.Errorf("listen = %q, want %q", got, tc.want)
			}
			if got := s.Origins["listen"].Source; got != tc.source {
				t.Errorf("listen came from %v (%+v), want %v", got, s.Origins["listen"], tc.source)
			}
		})
	}
}

// Each kind of flag takes its value from a variable and from the file; a
// list in the file replaces a list flag's default, and a variable holds a
// list comma-separated.
func TestEveryKindOfFlag(t *testing.T) {
	want := map[string]string{
		"issuer-jwks":         "/etc/countersign/jwks.json",
		"dev":                 "true",
		"policy-timeout":      "250ms",
		"mcp-allowed-origins": "[https://a.example,https://b.example]",
	}
	t.Run("from the environment", func(t *testing.T) {
		fs := flags()
		_, err := config.Load(fs, "config", env(map[string]string{
			"COUNTERSIGN_ISSUER_JWKS":         "/etc/countersign/jwks.json",
			"COUNTERSIGN_DEV":                 "true",
			"COUNTERSIGN_POLICY_TIMEOUT":      "250ms",
			"COUNTERSIGN_MCP_ALLOWED_ORIGINS": "https://a.example,https://b.example",
		}))
		if err != nil {
			t.Fatal(err)
		}
		for name, v := range want {
			if got := fs.Lookup(name).Value.String(); got != v {
				t.Errorf("--%s = %q, want %q", name, got, v)
			}
		}
	})
	t.Run("from the file", func(t *testing.T) {
		fs := flags()
		file := writeFile(t, `# a comment
issuer-jwks: /etc/countersign/jwks.json
dev: true
policy-timeout: 250ms
mcp-allowed-origins:
  - https://a.example
  - https://b.example
`)
		s, err := config.Load(fs, "config", env(map[string]string{"COUNTERSIGN_CONFIG": file}))
		if err != nil {
			t.Fatal(err)
		}
		for name, v := range want {
			if got := fs.Lookup(name).Value.String(); got != v {
				t.Errorf("--%s = %q, want %q", name, got, v)
			}
		}
		if got := strings.Join(s.Keys(config.FromFile), " "); got != "dev issuer-jwks mcp-allowed-origins policy-timeout" {
			t.Errorf("keys from the file: %s", got)
		}
		if o := s.Origins["dev"]; o.Where != file+":3" {
			t.Errorf("dev came from %q, want %s:3", o.Where, file)
		}
	})
}

// Every problem of a file is reported at once, each naming the key and its
// line and saying what the flag wants, never the value it was given.
func TestFileProblems(t *testing.T) {
	file := writeFile(t, `listen: 0.0.0.0:8080
listn: 0.0.0.0:8080
dev: s3cret-yes
policy-timeout: s3cret-5
listen: 0.0.0.0:9090
issuer-jwks: [a, b]
mcp-allowed-origins: {a: b}
config: other.yaml
help: true
`)
	fs := flags()
	_, err := config.Load(fs, "config", env(map[string]string{"COUNTERSIGN_CONFIG": file}))
	if err == nil {
		t.Fatal("no problem")
	}
	wants := []struct {
		line string
		says string
		is   error
	}{
		{":2", `unknown key "listn": there is no flag --listn`, config.ErrUnknownKey},
		{":3: dev", "want true or false", config.ErrInvalidValue},
		{":4: policy-timeout", "want a duration such as 500ms", config.ErrInvalidValue},
		{":5: listen", "given twice (first on line 1)", config.ErrInvalidValue},
		{":6: issuer-jwks", "want a string, not a list", config.ErrInvalidValue},
		{":7: mcp-allowed-origins", "not a mapping", config.ErrInvalidValue},
		{":8: config", "a config file cannot name another; set --config or COUNTERSIGN_CONFIG", config.ErrInvalidValue},
		{":9", `unknown key "help"`, config.ErrUnknownKey},
	}
	problems := err.(interface{ Unwrap() []error }).Unwrap()
	if len(problems) != len(wants) {
		t.Errorf("%d problems, want %d:\n%v", len(problems), len(wants), err)
	}
	for i, w := range wants {
		if i >= len(problems) {
			break
		}
		p := problems[i]
		if !strings.HasPrefix(p.Error(), file+w.line) || !strings.Contains(p.Error(), w.says) || !errors.Is(p, w.is) {
			t.Errorf("problem %d: %q, want %s%s ... %q (%v)", i, p, file, w.line, w.says, w.is)
		}
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Errorf("a problem repeats a value: %v", err)
	}
	if got := fs.Lookup("listen").Value.String(); got != "0.0.0.0:8080" {
		t.Errorf("the usable key was not set: listen = %q", got)
	}
}

// A variable the flag does not parse is a problem naming the variable, not
// its value; the other variables are still applied.
func TestEnvProblems(t *testing.T) {
	fs := flags()
	_, err := config.Load(fs, "config", env(map[string]string{
		"COUNTERSIGN_POLICY_TIMEOUT": "s3cret",
		"COUNTERSIGN_DEV":            "maybe",
		"COUNTERSIGN_LISTEN":         "10.0.0.1:8080",
		"COUNTERSIGN_HELP":           "true",
	}))
	for _, w := range []string{"COUNTERSIGN_DEV: invalid value: want true or false", "COUNTERSIGN_POLICY_TIMEOUT: invalid value: want a duration"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("%v, want it to say %q", err, w)
		}
	}
	if err != nil && strings.Contains(err.Error(), "s3cret") {
		t.Errorf("a problem repeats a value: %v", err)
	}
	if got := fs.Lookup("listen").Value.String(); got != "10.0.0.1:8080" {
		t.Errorf("listen = %q", got)
	}
	if fs.Lookup("help").Changed {
		t.Error("COUNTERSIGN_HELP set --help")
	}
}

// A file that cannot be read, is not YAML, is not one mapping or holds
// two documents is refused as a file; an empty one sets nothing.
func TestUnusableFiles(t *testing.T) {
	for _, tc := range []struct {
		name, text, says string
	}{
		{"not YAML", "listen: [0.0.0.0\n", "yaml:"},
		{"a list, not a mapping", "- listen\n", ":1: unusable config file: want one mapping"},
		{"two documents", "listen: a\n---\nlisten: b\n", "more than one YAML document"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Load(flags(), "config", env(map[string]string{"COUNTERSIGN_CONFIG": writeFile(t, tc.text)}))
			if !errors.Is(err, config.ErrFile) || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("%v, want %v saying %q", err, config.ErrFile, tc.says)
			}
		})
	}
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	if _, err := config.Load(flags(), "config", env(map[string]string{"COUNTERSIGN_CONFIG": missing})); !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Errorf("a missing file: %v", err)
	}
	for _, text := range []string{"", "# only a comment\n"} {
		s, err := config.Load(flags(), "config", env(map[string]string{"COUNTERSIGN_CONFIG": writeFile(t, text)}))
		if err != nil || len(s.Keys(config.FromFile)) != 0 {
			t.Errorf("file %q: %v, %v", text, s.Origins, err)
		}
	}
}
