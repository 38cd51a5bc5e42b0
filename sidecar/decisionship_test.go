package sidecar_test

import (
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/plugins/logs"

	"github.com/countersign/countersign/cmd/devstack"
)

// A sidecar started with a decision-log URL ships each decision it makes
// there, in OPA's event shape, under the decision_id the API shows; the
// events still buffered when it stops are sent before it has stopped.
func TestDecisionsAreShippedToTheDecisionLogURL(t *testing.T) {
	events := make(chan map[string]any, 10)
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			t.Errorf("not gzip: %v", err)
			return
		}
		raw, err := io.ReadAll(zr)
		if err != nil {
			t.Errorf("not gzip: %v", err)
		}
		var batch []map[string]any
		if err := json.Unmarshal(raw, &batch); err != nil {
			t.Errorf("not a JSON array: %v", err)
		}
		// OPA's own type for an event reads each the same.
		var opa []logs.EventV1
		if err := json.Unmarshal(raw, &opa); err != nil || len(opa) != len(batch) {
			t.Errorf("as OPA's decision-log events: %v", err)
		}
		for i, ev := range opa {
			if ev.DecisionID == "" || ev.Labels["id"] == "" || ev.Labels["version"] == "" || ev.RequestedBy != "rep-ana" ||
				ev.Bundles["countersign"].Revision != "p1" || ev.Input == nil || ev.Result == nil || ev.Timestamp.IsZero() {
				t.Errorf("event %d as OPA reads it: %+v", i, ev)
			}
		}
		for _, e := range batch {
			events <- e
		}
	}))
	defer sink.Close()
	e := start(t, devstack.Options{DecisionLogURL: sink.URL + "/logs"})
	e.open(t, "rep-ana", "W1")
	e.propose(t, "rep-ana", "W1", "issue_refund", refund("O-1001", 3000))
	var log struct {
		Decisions []struct {
			DecisionID string `json:"decision_id"`
		} `json:"decisions"`
	}
	e.call(t, http.MethodGet, "/v1/decisions?workflow=W1", "lead-dee", nil).decode(t, &log)
	if len(log.Decisions) != 1 {
		t.Fatalf("decision log %+v, want one decision", log)
	}
	e.st.Close() // flushes the buffer: the default batch waits 5 s otherwise

	var got map[string]any
	select {
	case got = <-events:
	case <-time.After(30 * time.Second): // a hang, not a timing assertion
		t.Fatal("no event reached the sink")
	}
	labels, _ := got["labels"].(map[string]any)
	if got["decision_id"] != log.Decisions[0].DecisionID || got["requested_by"] != "rep-ana" ||
		got["path"] != "countersign/call/decision" || labels["app"] != "countersign" || labels["id"] == "" || labels["version"] == "" {
		t.Errorf("shipped %v, want decision %s requested by rep-ana, with labels", got, log.Decisions[0].DecisionID)
	}
}
