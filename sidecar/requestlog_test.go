package sidecar_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/countersign/countersign/cmd/devstack"
)

// requestLine is the sidecar's log line of one request.
type requestLine struct {
	Level     string `json:"level"`
	Msg       string `json:"msg"`
	Component string `json:"component"`
	RequestID string `json:"request_id"`
	Path      string `json:"path"`
	Status    int    `json:"status"`
	Err       string `json:"err"`
}

// requestLines returns the sidecar's request lines in the log so far.
func requestLines(t *testing.T, logs *logBuffer) []requestLine {
	t.Helper()
	var out []requestLine
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var r requestLine
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("a log line that is not JSON: %v\n%s", err, l)
		}
		if r.Component == "sidecar" && r.Msg == "request" {
			out = append(out, r)
		}
	}
	return out
}

// TestRequestLogLevels holds the request log to what an operator reading it
// at INFO expects: the probes and the scrapes are not there (DEBUG only), a
// client's mistake (4xx) is at INFO, a failure (5xx) at ERROR with its
// error, each with the request id the client got in X-Request-Id.
func TestRequestLogLevels(t *testing.T) {
	logs := &logBuffer{}
	var level slog.LevelVar // INFO, as serve's default
	e := start(t, devstack.Options{Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: &level}))})

	probes := []string{"/healthz", "/readyz", "/metrics"}
	for _, p := range probes {
		e.call(t, http.MethodGet, p, "", nil).want(t, http.StatusOK, "")
	}
	refused := e.call(t, http.MethodGet, "/v1/tools", "", nil)
	refused.want(t, http.StatusUnauthorized, "token_missing")
	e.open(t, "rep-ana", "W-down")
	e.sim(t, http.MethodPut, e.st.Endpoints.Ledger+"/_sim/faults", map[string]int{"unavailable": 1000}, http.StatusOK)
	failed, _ := e.propose(t, "rep-ana", "W-down", "issue_refund", refund("O-1001", 3000))
	failed.want(t, http.StatusServiceUnavailable, "system_unavailable")

	byID := map[string]requestLine{}
	for _, r := range requestLines(t, logs) {
		for _, p := range probes {
			if r.Path == p {
				t.Errorf("%s logged at %s, want DEBUG only", p, r.Level)
			}
		}
		byID[r.RequestID] = r
	}
	for _, tc := range []struct {
		name, level string
		got         reply
	}{
		{"a 401", "INFO", refused},
		{"a 503", "ERROR", failed},
	} {
		id := tc.got.header.Get("X-Request-Id")
		r, ok := byID[id]
		if !ok {
			t.Errorf("%s: no request line with its id %q", tc.name, id)
			continue
		}
		if r.Level != tc.level || r.Status != tc.got.status {
			t.Errorf("%s: logged at %s with status %d, want %s and %d", tc.name, r.Level, r.Status, tc.level, tc.got.status)
		}
	}
	if r := byID[failed.header.Get("X-Request-Id")]; !strings.Contains(r.Err, "unavailable") {
		t.Errorf("the 503's line does not carry its error: %+v", r)
	}
	if n := strings.Count(logs.String(), `"level":"ERROR"`); n != 1 {
		t.Errorf("%d ERROR lines for one failed request, want 1:\n%s", n, logs)
	}

	level.Set(slog.LevelDebug)
	for _, p := range probes {
		probe := e.call(t, http.MethodGet, p, "", nil)
		var found bool
		for _, r := range requestLines(t, logs) {
			if r.RequestID == probe.header.Get("X-Request-Id") {
				found = true
				if r.Level != "DEBUG" || r.Path != p {
					t.Errorf("%s at DEBUG: logged %+v, want level DEBUG", p, r)
				}
			}
		}
		if !found {
			t.Errorf("%s: no line at DEBUG", p)
		}
	}
}
