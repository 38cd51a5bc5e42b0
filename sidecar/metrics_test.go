package sidecar_test

import (
	"bytes"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/countersign/countersign/cmd/devstack"
	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/monitor"
	"github.com/countersign/countersign/executor/tool"
)

// TestCountersStartAtZero: a fresh sidecar's /metrics already has every
// alert kind and every tool's dispatch error class at 0, before anything
// happened, so that an alert on their first increase can fire; breaker
// trips, by agent version, start at 0 for every tool once a version has
// decided.
func TestCountersStartAtZero(t *testing.T) {
	e := start(t, devstack.Options{})
	page := string(e.call(t, http.MethodGet, "/metrics", "", nil).body)
	for _, kind := range monitor.Kinds() {
		if v := metric(t, page, `countersign_alerts_total{kind="`+kind+`"}`); v != 0 {
			t.Errorf("alerts of kind %s: %v, want 0", kind, v)
		}
	}
	for _, spec := range tool.All() {
		for _, class := range engine.DispatchClasses() {
			if v := metric(t, page, `countersign_dispatch_errors_total{class="`+class+`",tool="`+string(spec.Name)+`"}`); v != 0 {
				t.Errorf("dispatch errors of %s, %s: %v, want 0", spec.Name, class, v)
			}
		}
	}

	e.call(t, http.MethodPost, "/v1/workflows", "rep-ana", map[string]string{"ticket": "T-zero", "id": "W-zero", "agent_version": "v7"}).
		want(t, http.StatusCreated, "")
	e.propose(t, "rep-ana", "W-zero", "lookup_order", map[string]string{"order": "O-1001"})
	page = string(e.call(t, http.MethodGet, "/metrics", "", nil).body)
	for _, spec := range tool.All() {
		if v := metric(t, page, `countersign_breaker_trips_total{agent_version="v7",tool="`+string(spec.Name)+`"}`); v != 0 {
			t.Errorf("breaker trips of %s for v7: %v, want 0", spec.Name, v)
		}
	}
}

// TestRequestDurationByRoute: the request duration histogram names Echo's
// route template, never the URL with its ids, and a path no route matches
// as "unmatched".
func TestRequestDurationByRoute(t *testing.T) {
	e := start(t, devstack.Options{})
	e.open(t, "rep-ana", "W-route-1")
	e.open(t, "rep-ana", "W-route-2")
	e.getWorkflow(t, "rep-ana", "W-route-1")
	e.getWorkflow(t, "rep-ana", "W-route-2")
	e.call(t, http.MethodGet, "/v1/workflows/W-route-3", "rep-ana", nil).want(t, http.StatusNotFound, "not_found")
	e.call(t, http.MethodGet, "/no-such-page-W-route-4", "", nil).want(t, http.StatusNotFound, "")

	page := string(e.call(t, http.MethodGet, "/metrics", "", nil).body)
	const h = "countersign_http_request_duration_seconds_count"
	if v := metric(t, page, h+`{code="200",method="GET",route="/v1/workflows/:id"}`); v != 2 {
		t.Errorf("GET /v1/workflows/:id answered 200: %v, want 2", v)
	}
	if v := metric(t, page, h+`{code="404",method="GET",route="/v1/workflows/:id"}`); v != 1 {
		t.Errorf("GET /v1/workflows/:id answered 404: %v, want 1", v)
	}
	if v := metric(t, page, h+`{code="201",method="POST",route="/v1/workflows"}`); v != 2 {
		t.Errorf("POST /v1/workflows answered 201: %v, want 2", v)
	}
	if v := metric(t, page, h+`{code="404",method="GET",route="unmatched"}`); v != 1 {
		t.Errorf("unmatched GET answered 404: %v, want 1", v)
	}
	for _, line := range strings.Split(page, "\n") {
		if strings.HasPrefix(line, "countersign_http_request_duration_seconds") && strings.Contains(line, "W-route") {
			t.Errorf("a series names a raw path: %s", line)
		}
	}
}

// TestActiveBundleGauge: countersign_active_bundle names the active
// bundle alone, and after another is activated, that one alone.
func TestActiveBundleGauge(t *testing.T) {
	e := start(t, devstack.Options{})
	var p1 struct{ Revision, Digest string }
	e.call(t, http.MethodGet, "/v1/bundles/active", "ops-ida", nil).decode(t, &p1)
	e.wantActiveBundle(t, p1.Revision, p1.Digest)

	tight := packed(t, p1Edited(t, "p1-tight", func(s string) string { return s }, map[string]string{
		"data.json": p1DataWith(t, func(cs map[string]any) { cs["limits"].(map[string]any)["refund_auto"] = 4000 }),
		".manifest": `{"revision": "p1-tight", "roots": ["countersign"], "rego_version": 1,
			"metadata": {"limit_changes": [{"name": "refund_auto", "from": 5000, "to": 4000}]}}`,
	}))
	e.uploadAs(t, "", bytes.NewReader(tight)).want(t, http.StatusCreated, "")
	var now struct{ Revision, Digest string }
	e.call(t, http.MethodGet, "/v1/bundles/active", "ops-ida", nil).decode(t, &now)
	if now.Revision != "p1-tight" || now.Digest == p1.Digest {
		t.Fatalf("active bundle %+v, want p1-tight", now)
	}
	e.wantActiveBundle(t, now.Revision, now.Digest)
}

var activeBundleSeries = regexp.MustCompile(`(?m)^countersign_active_bundle\{digest="([^"]*)",revision="([^"]*)"\} (\S+)$`)

// wantActiveBundle scrapes /metrics and wants one active-bundle series,
// naming revision and digest, at 1.
func (e *env) wantActiveBundle(t *testing.T, revision, digest string) {
	t.Helper()
	page := string(e.call(t, http.MethodGet, "/metrics", "", nil).body)
	got := activeBundleSeries.FindAllStringSubmatch(page, -1)
	if len(got) != 1 || got[0][1] != digest || got[0][2] != revision || got[0][3] != "1" {
		t.Errorf("countersign_active_bundle series %q, want one for %s %s at 1", got, revision, digest)
	}
}
