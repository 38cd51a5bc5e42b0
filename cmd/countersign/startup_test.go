package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestServeStartProblems runs the real binary as a newcomer would and
// checks that each start-up problem a person must fix ends the process with
// exit status 1 and one line on stderr saying what is wrong and what to do,
// never a panic: a data dir another serve holds, a port another serve
// listens on, and a data dir that cannot be created (under a regular file,
// because the tests may run as root, which ignores file modes). It checks
// serve --dev and the production serve alike.
func TestServeStartProblems(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts a stack")
	}
	bin := buildServeBinary(t)
	held := t.TempDir()
	first := startServe(t, bin, held)
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	unwritable := filepath.Join(file, "data")
	prod := []string{"--agent", "support-agent", "--ledger", "http://127.0.0.1:1", "--orders", "http://127.0.0.1:1", "--issuer", "idp", "--issuer-jwks", "http://127.0.0.1:1/jwks.json"}
	pid := "pid " + strconv.Itoa(first.cmd.Process.Pid)

	for _, tc := range []struct {
		name string
		args []string
		want []string // all in the one line
	}{
		{"serve --dev on a data dir another serve holds", []string{"--dev", "--data", held}, []string{held, pid, "--data"}},
		{"serve --dev on a port another serve listens on", []string{"--dev", "--data", t.TempDir(), "--listen", first.addr}, []string{"port " + first.addr, "in use", "--listen"}},
		{"serve --dev on a data dir under a regular file", []string{"--dev", "--data", unwritable}, []string{unwritable, "cannot be written", "not a directory", "--data"}},
		{"serve on a data dir another serve holds", append([]string{"--data", held}, prod...), []string{held, pid, "--data"}},
		{"serve on a port another serve listens on", append([]string{"--data", t.TempDir(), "--listen", first.addr}, prod...), []string{"port " + first.addr, "--listen"}},
		{"serve on a data dir under a regular file", append([]string{"--data", unwritable}, prod...), []string{unwritable, "cannot be written", "--data"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var stdout, stderr bytes.Buffer
			cmd := exec.CommandContext(ctx, bin, append([]string{"serve"}, tc.args...)...)
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 {
				t.Fatalf("exit: %v, want status 1\nstdout: %s\nstderr: %s", err, &stdout, &stderr)
			}
			all := stdout.String() + stderr.String()
			if strings.Contains(all, "panic") || strings.Contains(all, "goroutine") {
				t.Fatalf("a stack trace:\n%s", all)
			}
			line := strings.TrimSuffix(stderr.String(), "\n")
			if strings.Contains(line, "\n") || !strings.HasPrefix(line, "countersign: ") {
				t.Fatalf("stderr is not one countersign line:\n%s", &stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(line, w) {
					t.Errorf("%q does not say %q", line, w)
				}
			}
		})
	}
	first.stop(t)
}

// buildServeBinary builds countersign once for the test, as a user gets it.
func buildServeBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "countersign")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// served is a running `serve --dev`.
type served struct {
	cmd  *exec.Cmd
	addr string // the sidecar's host:port
	done chan error
}

// startServe runs serve --dev over dir and waits until it wrote its
// endpoints and answers /readyz.
func startServe(t *testing.T, bin, dir string) *served {
	t.Helper()
	return startServeWith(t, bin, dir, &syncBuffer{})
}

// startServeWith runs serve --dev over dir with the extra flags, its
// stderr (the log) going to stderr, and waits as startServe does.
func startServeWith(t *testing.T, bin, dir string, stderr *syncBuffer, flags ...string) *served {
	t.Helper()
	return startCommand(t, exec.Command(bin, append([]string{"serve", "--dev", "--data", dir}, flags...)...), dir, stderr)
}

// startCommand starts cmd, a serve --dev over dir, its stderr going to
// stderr, and waits as startServe does.
func startCommand(t *testing.T, cmd *exec.Cmd, dir string, stderr *syncBuffer) *served {
	t.Helper()
	s := &served{cmd: cmd, done: make(chan error, 1)}
	stdout := &syncBuffer{}
	s.cmd.Stdout, s.cmd.Stderr = stdout, stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { s.done <- s.cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = s.cmd.Process.Kill() })
	deadline := time.After(90 * time.Second)
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-exited:
			t.Fatalf("the first serve exited before it was ready:\n%s%s", stdout, stderr)
		case <-deadline:
			t.Fatal("the first serve is not ready after 90s")
		case <-tick.C:
		}
		if s.ready(dir) {
			return s
		}
	}
}

func (s *served) ready(dir string) bool {
	var ep struct{ Sidecar string }
	b, err := os.ReadFile(filepath.Join(dir, "dev-endpoints.json"))
	if err != nil || json.Unmarshal(b, &ep) != nil || ep.Sidecar == "" {
		return false
	}
	res, err := http.Get(ep.Sidecar + "/readyz")
	if err != nil {
		return false
	}
	res.Body.Close()
	s.addr = strings.TrimPrefix(ep.Sidecar, "http://")
	return res.StatusCode == http.StatusOK
}

// stop ends the first serve with SIGTERM and checks it was undisturbed.
func (s *served) stop(t *testing.T) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-s.done:
		if err != nil {
			t.Fatalf("the first serve ended with %v after SIGTERM, want status 0", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the first serve still runs 30s after SIGTERM")
	}
}

// syncBuffer is a process's output, read while the process writes it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
