package sidecar_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/cmd/devstack"
	"github.com/countersign/countersign/executor/fixture"
	"github.com/countersign/countersign/executor/simclock"
)

// env is one running stack and a client for it. Every answer of the sidecar
// passes through send, which checks what the contract promises of all of
// them: a request id, an error body with a code and a message, and a
// Bearer challenge with every 401.
type env struct {
	st     *devstack.Stack
	dir    string
	client *http.Client
}

// start brings up a stack with o (over a fresh data directory unless
// o.DataDir is set) and closes it when the test ends.
func start(t *testing.T, o devstack.Options) *env {
	t.Helper()
	if o.DataDir == "" {
		o.DataDir = t.TempDir()
	}
	st, err := devstack.Start(context.Background(), o)
	if err != nil {
		t.Fatalf("devstack.Start: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return &env{st: st, dir: o.DataDir, client: &http.Client{Timeout: 30 * time.Second}}
}

// newManualClock is the simulated clock: time moves only when a test says so.
func newManualClock() *simclock.Clock {
	return simclock.New(time.Now().UTC().Truncate(time.Second))
}

// reply is one HTTP answer, read in full.
type reply struct {
	status int
	header http.Header
	body   []byte
}

// apiError is the contract's error object.
type apiError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Rule    string `json:"rule"`
}

// errorOf returns the error object of a non-2xx answer.
func (r reply) errorOf(t *testing.T) apiError {
	t.Helper()
	var b struct {
		Error *apiError `json:"error"`
	}
	if err := json.Unmarshal(r.body, &b); err != nil || b.Error == nil {
		t.Errorf("status %d: body is not {\"error\":{...}}: %s", r.status, r.body)
		return apiError{}
	}
	return *b.Error
}

func (r reply) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decoding %s: %v", r.body, err)
	}
}

// want fails the test unless the answer has status, and, for an error,
// error.code.
func (r reply) want(t *testing.T, status int, code string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body %s", r.status, status, r.body)
	}
	if code != "" {
		if got := r.errorOf(t).Code; got != code {
			t.Fatalf("error.code %q, want %q; body %s", got, code, r.body)
		}
	}
}

// send makes a request to the sidecar and checks the promises every answer
// keeps: a request id, the error shape on every non-2xx, and a Bearer
// challenge on every 401. It never calls t.Fatal, so goroutines may use it.
func (e *env) send(t *testing.T, method, path string, header http.Header, body io.Reader) reply {
	t.Helper()
	req, err := http.NewRequest(method, e.st.Endpoints.Sidecar+path, body)
	if err != nil {
		t.Errorf("%s %s: %v", method, path, err)
		return reply{}
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	res, err := e.client.Do(req)
	if err != nil {
		t.Errorf("%s %s: %v", method, path, err)
		return reply{}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Errorf("%s %s: reading the body: %v", method, path, err)
	}
	r := reply{status: res.StatusCode, header: res.Header, body: b}
	if res.Header.Get("X-Request-Id") == "" {
		t.Errorf("%s %s: no X-Request-Id in the answer", method, path)
	}
	if r.status >= 300 && r.status != http.StatusNotModified { // a 304 has no body
		if e := r.errorOf(t); e.Code == "" || e.Message == "" {
			t.Errorf("%s %s: status %d: error without code or message: %s", method, path, r.status, b)
		}
	}
	if r.status == http.StatusUnauthorized && !strings.HasPrefix(res.Header.Get("WWW-Authenticate"), "Bearer") {
		t.Errorf("%s %s: 401 without WWW-Authenticate: Bearer (got %q)", method, path, res.Header.Get("WWW-Authenticate"))
	}
	return r
}

// call sends body as JSON (nil: no body) with the bearer token of person
// who ("": no Authorization header).
func (e *env) call(t *testing.T, method, path, who string, body any) reply {
	t.Helper()
	h := http.Header{}
	if who != "" {
		tok, ok := e.st.Tokens[who]
		if !ok {
			t.Errorf("no dev token for %q", who)
		}
		h.Set("Authorization", "Bearer "+tok)
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Errorf("marshal: %v", err)
		}
		rd = bytes.NewReader(b)
		h.Set("Content-Type", "application/json")
	}
	return e.send(t, method, path, h, rd)
}

// workflow and step are the API's views (sidecar/openapi.json), decoded.
type workflow struct {
	ID             string `json:"id"`
	Ticket         string `json:"ticket"`
	User           string `json:"user"`
	Status         string `json:"status"`
	PolicyRevision string `json:"policy_revision"`
	Steps          []step `json:"steps"`
}

type step struct {
	Workflow string         `json:"workflow"`
	N        int            `json:"n"`
	Tool     string         `json:"tool"`
	Args     map[string]any `json:"args"`
	Status   string         `json:"status"`
	Decision string         `json:"decision"`
	Rule     string         `json:"rule"`
	Approval *struct {
		ID      string    `json:"id"`
		Status  string    `json:"status"`
		Summary string    `json:"summary"`
		Expires time.Time `json:"expires"`
	} `json:"approval"`
	Result       json.RawMessage `json:"result"`
	DuplicateOf  int             `json:"duplicate_of"`
	ResolveAfter *time.Time      `json:"resolve_after"`
}

type approval struct {
	ID        string `json:"id"`
	Workflow  string `json:"workflow"`
	N         int    `json:"n"`
	Summary   string `json:"summary"`
	Requester string `json:"requester"`
	Status    string `json:"status"`
	Approver  string `json:"approver"`
	CallHash  string `json:"call_hash"`
}

// refund is the args of issue_refund.
func refund(order string, cents int64) map[string]any {
	return map[string]any{"order": order, "amount": cents}
}

// open creates workflow id for rep who and expects 201.
func (e *env) open(t *testing.T, who, id string) {
	t.Helper()
	e.call(t, http.MethodPost, "/v1/workflows", who, map[string]string{"ticket": "T-" + id, "id": id}).want(t, http.StatusCreated, "")
}

// propose adds a step to workflow wf.
func (e *env) propose(t *testing.T, who, wf, tool string, args any) (reply, step) {
	t.Helper()
	r := e.call(t, http.MethodPost, "/v1/workflows/"+wf+"/steps", who, map[string]any{"tool": tool, "args": args})
	var s step
	if r.status != 0 {
		json.Unmarshal(r.body, &s)
	}
	return r, s
}

// getWorkflow reads workflow wf as who.
func (e *env) getWorkflow(t *testing.T, who, wf string) workflow {
	t.Helper()
	r := e.call(t, http.MethodGet, "/v1/workflows/"+wf, who, nil)
	r.want(t, http.StatusOK, "")
	var w workflow
	r.decode(t, &w)
	return w
}

// resume re-drives workflow wf as who.
func (e *env) resume(t *testing.T, who, wf string) workflow {
	t.Helper()
	r := e.call(t, http.MethodPost, "/v1/workflows/"+wf+"/resume", who, nil)
	r.want(t, http.StatusOK, "")
	var w workflow
	r.decode(t, &w)
	return w
}

// entry is a ledger entry as GET {ledger}/entries shows it.
type entry struct {
	ID     string `json:"id"`
	Kind   string `json:"kind"`
	Order  string `json:"order"`
	Amount int64  `json:"amount"`
	Key    string `json:"key"`
	By     string `json:"by"`
}

// ledger reads every entry of the ledger over its own HTTP API.
func (e *env) ledger(t *testing.T) []entry {
	t.Helper()
	res, err := e.client.Get(e.st.Endpoints.Ledger + "/entries")
	if err != nil {
		t.Fatalf("GET ledger entries: %v", err)
	}
	defer res.Body.Close()
	var b struct {
		Entries []entry `json:"entries"`
	}
	if err := json.NewDecoder(res.Body).Decode(&b); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET ledger entries: status %d, %v", res.StatusCode, err)
	}
	return b.Entries
}

// wantLedger fails unless the ledger holds exactly n entries.
func (e *env) wantLedger(t *testing.T, n int) []entry {
	t.Helper()
	got := e.ledger(t)
	if len(got) != n {
		t.Fatalf("ledger has %d entries, want %d: %+v", len(got), n, got)
	}
	return got
}

// person returns the fixture person with id.
func person(t *testing.T, id string) fixture.Person {
	t.Helper()
	p, ok := fixture.PersonByID(id)
	if !ok {
		t.Fatalf("no fixture person %q", id)
	}
	return p
}

// sim calls a simulator endpoint that takes no token (the /_sim/ admin
// channel, reporting reads) with body as JSON, and expects want.
func (e *env) sim(t *testing.T, method, url string, body any, want int) []byte {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := e.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	if res.StatusCode != want {
		t.Fatalf("%s %s: status %d, want %d: %s", method, url, res.StatusCode, want, out)
	}
	return out
}

// logBuffer collects a stack's log lines; handlers write from many
// goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
