package decisionship_test

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/countersign/countersign/executor/decisionship"
)

// sink is an httptest decision-log service: it decodes each POST as OPA's
// service would (gzip, then a JSON array of events, strictly) and hands
// the batch to the test. fail answers the first fail posts 503; hold, when
// set, keeps each post waiting until the test closes it.
type sink struct {
	t       *testing.T
	srv     *httptest.Server
	batches chan []map[string]any
	hold    chan struct{}
	entered chan struct{}

	mu    sync.Mutex
	fail  int
	posts int
}

func newSink(t *testing.T, fail int, hold bool) *sink {
	s := &sink{t: t, fail: fail, batches: make(chan []map[string]any, 100), entered: make(chan struct{}, 100)}
	if hold {
		s.hold = make(chan struct{})
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *sink) serve(w http.ResponseWriter, r *http.Request) {
	s.entered <- struct{}{}
	if s.hold != nil {
		<-s.hold
	}
	s.mu.Lock()
	s.posts++
	failing := s.posts <= s.fail
	s.mu.Unlock()
	if failing {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	if r.Method != http.MethodPost || r.Header.Get("Content-Encoding") != "gzip" || r.Header.Get("Content-Type") != "application/json" {
		s.t.Errorf("%s with Content-Encoding %q, Content-Type %q; want a POST of gzip JSON",
			r.Method, r.Header.Get("Content-Encoding"), r.Header.Get("Content-Type"))
	}
	zr, err := gzip.NewReader(r.Body)
	if err != nil {
		s.t.Errorf("the body is not gzip: %v", err)
		http.Error(w, "bad", http.StatusBadRequest)
		return
	}
	var batch []map[string]any
	dec := json.NewDecoder(zr)
	if err := dec.Decode(&batch); err != nil {
		s.t.Errorf("the body is not a JSON array: %v", err)
	}
	s.batches <- batch
}

// next waits for the next batch the sink took.
func (s *sink) next(t *testing.T) []map[string]any {
	t.Helper()
	select {
	case b := <-s.batches:
		return b
	case <-time.After(30 * time.Second): // a hang, not a timing assertion
		t.Fatal("no batch reached the sink")
		return nil
	}
}

func event(n int) decisionship.Event {
	return decisionship.Event{
		DecisionID: fmt.Sprintf("D%d", n), Path: "countersign/call/decision",
		Input:       json.RawMessage(fmt.Sprintf(`{"tool":"issue_refund","args":{"order":"O-1002","amount":%d}}`, n)),
		Result:      decisionship.Result{Decision: "ALLOW", Rule: "R1-auto"},
		Bundles:     map[string]decisionship.Bundle{"countersign": {Revision: "p1", Digest: "sha256:abc"}},
		RequestedBy: "rep-ana", Timestamp: time.Date(2026, 12, 2, 9, 0, n, 0, time.UTC),
	}
}

func ship(t *testing.T, s *sink, o decisionship.Options) (*decisionship.Shipper, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	o.URL, o.Registerer = s.srv.URL+"/logs", reg
	o.Labels = decisionship.Labels{App: "countersign", ID: "sidecar-1", Version: "v1.2.3"}
	sh, err := decisionship.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sh.Close(context.Background()) })
	return sh, reg
}

func counter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

func ids(batch []map[string]any) string {
	var out []string
	for _, e := range batch {
		out = append(out, fmt.Sprint(e["decision_id"]))
	}
	return strings.Join(out, ",")
}

func TestABatchIsOPAsDecisionLogShape(t *testing.T) {
	s := newSink(t, 0, false)
	sh, reg := ship(t, s, decisionship.Options{BatchSize: 2, FlushEvery: time.Hour})
	sh.Ship(event(1))
	sh.Ship(event(2))
	batch := s.next(t)
	if len(batch) != 2 {
		t.Fatalf("batch of %d events, want the 2 of a full batch", len(batch))
	}
	e := batch[0]
	for field, want := range map[string]any{
		"decision_id": "D1", "path": "countersign/call/decision", "requested_by": "rep-ana",
		"timestamp": "2026-12-02T09:00:01Z",
	} {
		if e[field] != want {
			t.Errorf("%s = %v, want %v", field, e[field], want)
		}
	}
	labels, _ := e["labels"].(map[string]any)
	if labels["id"] != "sidecar-1" || labels["version"] != "v1.2.3" || labels["app"] != "countersign" {
		t.Errorf("labels %v, want app, id and version", labels)
	}
	if in, _ := e["input"].(map[string]any); in["tool"] != "issue_refund" {
		t.Errorf("input %v", e["input"])
	}
	if r, _ := e["result"].(map[string]any); r["decision"] != "ALLOW" || r["rule"] != "R1-auto" {
		t.Errorf("result %v", e["result"])
	}
	b, _ := e["bundles"].(map[string]any)
	if cs, _ := b["countersign"].(map[string]any); cs["revision"] != "p1" || cs["digest"] != "sha256:abc" {
		t.Errorf("bundles %v", e["bundles"])
	}
	sh.Close(context.Background()) // the sender has counted what it sent
	if got := counter(t, reg, "countersign_decision_logs_shipped_total"); got != 2 {
		t.Errorf("shipped %v, want 2", got)
	}
}

// A partial batch goes when FlushEvery has passed, with nothing else to
// make it go: the test waits for it, it does not time it.
func TestAPartialBatchGoesAfterFlushEvery(t *testing.T) {
	s := newSink(t, 0, false)
	sh, _ := ship(t, s, decisionship.Options{BatchSize: 100, FlushEvery: 10 * time.Millisecond})
	sh.Ship(event(1))
	if got := ids(s.next(t)); got != "D1" {
		t.Fatalf("batch %s, want D1", got)
	}
}

func TestAFailedBatchIsSentAgainUntilTheSinkRecovers(t *testing.T) {
	s := newSink(t, 3, false)
	sh, reg := ship(t, s, decisionship.Options{BatchSize: 2, FlushEvery: time.Hour, FirstBackoff: time.Millisecond})
	sh.Ship(event(1))
	sh.Ship(event(2))
	if got := ids(s.next(t)); got != "D1,D2" {
		t.Fatalf("batch after the sink recovered: %s, want D1,D2", got)
	}
	s.mu.Lock()
	posts := s.posts
	s.mu.Unlock()
	if posts != 4 {
		t.Errorf("%d posts, want 3 refused and 1 taken", posts)
	}
	if got := counter(t, reg, "countersign_decision_logs_dropped_total"); got != 0 {
		t.Errorf("dropped %v while retrying, want 0", got)
	}
}

// With the sink stuck on a batch, Ship goes on returning at once, the
// buffer keeps the newest BufferSize events, and the oldest are counted
// dropped; once the sink answers, what was kept is shipped.
func TestAFullBufferDropsTheOldestAndNeverBlocks(t *testing.T) {
	s := newSink(t, 0, true)
	sh, reg := ship(t, s, decisionship.Options{BatchSize: 1, BufferSize: 2, FlushEvery: time.Hour})
	sh.Ship(event(1))
	<-s.entered // D1 is in flight, held by the sink
	for n := 2; n <= 6; n++ {
		sh.Ship(event(n)) // would hang here if Ship waited for room
	}
	if got := counter(t, reg, "countersign_decision_logs_dropped_total"); got != 3 {
		t.Errorf("dropped %v, want 3 (D2, D3, D4)", got)
	}
	close(s.hold)
	var got []string
	for len(got) < 3 {
		got = append(got, ids(s.next(t)))
	}
	if strings.Join(got, ",") != "D1,D5,D6" {
		t.Errorf("shipped %v, want D1 then the newest two, D5 and D6", got)
	}
}

func TestCloseFlushesWhatWaits(t *testing.T) {
	s := newSink(t, 0, false)
	sh, reg := ship(t, s, decisionship.Options{BatchSize: 100, FlushEvery: time.Hour})
	sh.Ship(event(1))
	sh.Ship(event(2))
	if err := sh.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := ids(s.next(t)); got != "D1,D2" {
		t.Fatalf("batch on close %s, want D1,D2", got)
	}
	sh.Ship(event(3))
	if got := counter(t, reg, "countersign_decision_logs_dropped_total"); got != 1 {
		t.Errorf("an event shipped after Close: dropped %v, want 1", got)
	}
}

// A sink that never recovers does not hold a stop up past its deadline:
// what it did not take is dropped and counted.
func TestCloseGivesUpAtItsDeadline(t *testing.T) {
	s := newSink(t, 1<<30, false)
	sh, reg := ship(t, s, decisionship.Options{BatchSize: 100, FlushEvery: time.Hour, FirstBackoff: time.Millisecond})
	sh.Ship(event(1))
	sh.Ship(event(2))
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-s.entered; cancel() }()
	if err := sh.Close(ctx); err == nil {
		t.Fatal("Close returned nil with the sink refusing everything")
	}
	if got := counter(t, reg, "countersign_decision_logs_dropped_total"); got != 2 {
		t.Errorf("dropped %v, want 2", got)
	}
}

func TestOptionsReportEveryProblem(t *testing.T) {
	err := decisionship.Options{URL: "ftp://x", BatchSize: -1}.Validate()
	if err == nil || !strings.Contains(err.Error(), "absolute http(s) URL") || !strings.Contains(err.Error(), "negative") {
		t.Errorf("Validate: %v, want both problems", err)
	}
}
