package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/executor/buildinfo"
)

// runRoot runs countersign with args through the root command and returns
// what it printed (stdout and stderr together). A command that serves
// stops after 20 s, so that a serve which should have refused to start
// fails its test instead of hanging it.
func runRoot(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newRootCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	err := cmd.ExecuteContext(ctx)
	return out.String(), err
}

func TestVersionPrintsTheBuild(t *testing.T) {
	want := buildinfo.Read()
	t.Run("as text, one fact a line", func(t *testing.T) {
		out, err := runRoot(t, "version")
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range []string{"countersign " + want.Version, "revision    " + want.Revision, "go          " + want.GoVersion, "opa         " + want.OPAVersion} {
			if !strings.Contains(out, line+"\n") {
				t.Errorf("version lacks %q:\n%s", line, out)
			}
		}
	})
	t.Run("as JSON, the object /readyz carries", func(t *testing.T) {
		out, err := runRoot(t, "version", "--json")
		if err != nil {
			t.Fatal(err)
		}
		var got buildinfo.Info
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		if got != want || got.OPAVersion == buildinfo.Unknown {
			t.Errorf("got %+v, want %+v with a known OPA", got, want)
		}
	})
}
