package main_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServeLogFlags runs the binary as an operator would, with the log
// flags, and reads what it writes on stderr: at the default (JSON, INFO)
// a probe leaves no line, a 401 one at INFO and a 503 one at ERROR, each
// with the X-Request-Id the client got; with --log-level debug
// --log-format text the probe is there, at DEBUG, as key=value; with
// --log-level warn the 401 is gone and the 503 stays.
func TestServeLogFlags(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts stacks")
	}
	bin := buildServeBinary(t)

	t.Run("json at info by default", func(t *testing.T) {
		d := startLogged(t, bin)
		probe := d.get(t, "/healthz", "")
		refused := d.get(t, "/v1/tools", "")
		failed := d.failedRefund(t)
		lines := d.waitFor(t, failed)
		for _, l := range strings.Split(strings.TrimSpace(lines), "\n") {
			if !json.Valid([]byte(l)) {
				t.Errorf("a line that is not JSON: %s", l)
			}
		}
		d.wantNo(t, lines, probe, "the probe at INFO")
		for _, tc := range []struct {
			id, level string
			status    int
		}{{refused, "INFO", 401}, {failed, "ERROR", 503}} {
			l := lineOf(lines, `"request_id":"`+tc.id+`"`)
			var r struct {
				Level  string `json:"level"`
				Status int    `json:"status"`
			}
			if err := json.Unmarshal([]byte(l), &r); err != nil || r.Level != tc.level || r.Status != tc.status {
				t.Errorf("the %d's line is %q (%v), want level %s", tc.status, l, err, tc.level)
			}
		}
	})

	t.Run("text at debug shows the probes", func(t *testing.T) {
		d := startLogged(t, bin, "--log-level", "debug", "--log-format", "text")
		probe := d.get(t, "/healthz", "")
		l := lineOf(d.waitFor(t, probe), "request_id="+probe)
		for _, want := range []string{"level=DEBUG", "msg=request", "path=/healthz", "status=200"} {
			if !strings.Contains(l, want) {
				t.Errorf("the probe's line %q lacks %q", l, want)
			}
		}
	})

	t.Run("warn leaves out a 4xx", func(t *testing.T) {
		d := startLogged(t, bin, "--log-level", "warn")
		refused := d.get(t, "/v1/tools", "")
		lines := d.waitFor(t, d.failedRefund(t))
		d.wantNo(t, lines, refused, "the 401 at WARN")
	})

	for _, tc := range []struct{ flags, says []string }{
		{[]string{"--log-level", "verbose"}, []string{`--log-level "verbose"`, "debug, info, warn or error"}},
		{[]string{"--log-format", "logfmt"}, []string{`--log-format "logfmt"`, "json or text"}},
	} {
		t.Run("refuses "+strings.Join(tc.flags, " "), func(t *testing.T) {
			var stderr bytes.Buffer
			cmd := exec.Command(bin, append([]string{"serve", "--dev", "--data", t.TempDir()}, tc.flags...)...)
			cmd.Stderr = &stderr
			var ee *exec.ExitError
			if err := cmd.Run(); !errors.As(err, &ee) || ee.ExitCode() != 1 {
				t.Fatalf("exit: %v, want status 1; stderr %s", err, &stderr)
			}
			for _, w := range tc.says {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("%q does not say %q", &stderr, w)
				}
			}
		})
	}
}

// logged is a running serve --dev and its output.
type logged struct {
	*served
	out    *syncBuffer
	dir    string
	ledger string
	tokens map[string]string
}

func startLogged(t *testing.T, bin string, flags ...string) *logged {
	t.Helper()
	d := &logged{out: &syncBuffer{}, dir: t.TempDir()}
	d.served = startServeWith(t, bin, d.dir, d.out, flags...)
	t.Cleanup(func() { d.stop(t) })
	var ep struct{ Ledger string }
	readJSON(t, filepath.Join(d.dir, "dev-endpoints.json"), &ep)
	readJSON(t, filepath.Join(d.dir, "dev-tokens.json"), &d.tokens)
	d.ledger = ep.Ledger
	return d
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// do sends a request (body as JSON when not "") with who's token ("":
// none) and returns the answer's request id after checking its status.
func (d *logged) do(t *testing.T, method, url, who, body string, want int) string {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if who != "" {
		req.Header.Set("Authorization", "Bearer "+d.tokens[who])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != want {
		t.Fatalf("%s %s: status %d, want %d", method, url, res.StatusCode, want)
	}
	return res.Header.Get("X-Request-Id")
}

func (d *logged) get(t *testing.T, path, who string) string {
	t.Helper()
	want := http.StatusOK
	if who == "" && strings.HasPrefix(path, "/v1/") {
		want = http.StatusUnauthorized
	}
	return d.do(t, http.MethodGet, "http://"+d.addr+path, who, "", want)
}

// failedRefund proposes a refund while the ledger answers 503 and returns
// the request id of the sidecar's 503.
func (d *logged) failedRefund(t *testing.T) string {
	t.Helper()
	d.do(t, http.MethodPost, "http://"+d.addr+"/v1/workflows", "rep-ana", `{"ticket":"T-1","id":"W1"}`, http.StatusCreated)
	d.do(t, http.MethodPut, d.ledger+"/_sim/faults", "", `{"unavailable":1000}`, http.StatusOK)
	return d.do(t, http.MethodPost, "http://"+d.addr+"/v1/workflows/W1/steps", "rep-ana",
		`{"tool":"issue_refund","args":{"order":"O-1001","amount":3000}}`, http.StatusServiceUnavailable)
}

// waitFor returns the output once it holds the line of request id: the
// process writes its log through a pipe, after the answer may have come.
// Lines of requests answered before it are in the output by then.
func (d *logged) waitFor(t *testing.T, id string) string {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(30 * time.Second)
	for {
		if out := d.out.String(); strings.Contains(out, id) {
			return out
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("no log line of request %s after 30s:\n%s", id, d.out)
		}
	}
}

func (d *logged) wantNo(t *testing.T, lines, id, what string) {
	t.Helper()
	if l := lineOf(lines, id); l != "" {
		t.Errorf("%s is logged: %s", what, l)
	}
}

// lineOf returns the first line of out that contains s, or "".
func lineOf(out, s string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}
