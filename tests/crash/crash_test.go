package crash_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/countersign/countersign/executor/pgtest"
	"github.com/countersign/countersign/tests/procs"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// Deadlines are generous because twelve runs share two cores; every wait
// polls for its event and ends as soon as it happens.
const (
	readyDeadline = 90 * time.Second
	exitDeadline  = 30 * time.Second
	pollEvery     = 25 * time.Millisecond
	workflowID    = "W-crash"
)

// step is one row group of the matrix: a tool call on O-1001 by rep-ana.
type step struct {
	name string // "refund" or "reship", as the crash table prints it
	body string // POST /v1/workflows/{id}/steps
	unit string // what one effect is called in the table
}

var steps = []step{
	{"refund", `{"tool":"issue_refund","args":{"order":"O-1001","amount":3000}}`, "refund(s)"},
	{"reship", `{"tool":"reship_order","args":{"order":"O-1001"}}`, "reship(s)"},
}

var points = []string{"before_dispatch", "after_dispatch", "after_record"}

// column is one way of running the system: designed, or with a control
// removed through COUNTERSIGN_REMOVE_CONTROLS.
type column struct {
	name    string
	removed string
	// want is the number of effects expected for step and crash point.
	want func(step, point string) int
}

var columns = []column{
	{name: "designed", want: func(string, string) int { return 1 }},
	{name: "no_write_ahead", removed: "write_ahead,reference_keys", want: func(step, point string) int {
		// A reshipment whose effect was committed but not recorded, with
		// no write-ahead record, looks pending on restart and is shipped
		// again. The order system's reference key would answer that
		// second request with the first shipment, so it is removed too:
		// the column shows what the write-ahead record alone prevents.
		if step == "reship" && point == "after_dispatch" {
			return 2
		}
		return 1
	}},
}

// backend is where the processes of a cell keep their store: flags returns
// the serve flags for one cell, the same for its first and its restarted
// process.
type backend struct {
	name  string
	flags func(t *testing.T, bin string) []string
}

var backends = []backend{
	{name: "bbolt", flags: func(*testing.T, string) []string { return nil }},
	{name: "postgres", flags: postgresFlags},
}

// postgresFlags puts a cell's store in a fresh PostgreSQL database, its
// signing keys sealed with a key file of its own, as tests/fleet runs serve.
// The lease TTL is short, so that the restarted process does not wait long
// for the workflow the killed one held.
func postgresFlags(t *testing.T, bin string) []string {
	keyFile := filepath.Join(t.TempDir(), "fleet.key")
	if out, err := exec.Command(bin, "keyfile", "-o", keyFile).CombinedOutput(); err != nil {
		t.Fatalf("countersign keyfile: %v\n%s", err, out)
	}
	return []string{"--store", pgtest.URL(t), "--key-file", keyFile, "--lease-ttl", "1s"}
}

// TestCrashMatrix kills a real countersign process with SIGKILL at each
// failpoint of a refund and of a reshipment, starts a new process over the
// same store (the data directory, or the same PostgreSQL database and key
// file), resumes, and counts the effects in the ledger and the order
// system: one in every cell of the designed system; with the write-ahead
// record removed, two reshipments after a crash at after_dispatch. It runs
// on both backends, bbolt and postgres.
func TestCrashMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and kills 12 real processes per backend; run without -short")
	}
	bin := procs.Build(t)
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { crashMatrix(t, bin, b) })
	}
}

func crashMatrix(t *testing.T, bin string, b backend) {
	if b.name != "bbolt" {
		pgtest.URL(t) // skip the backend in one line without PostgreSQL
	}
	began := time.Now()
	var mu sync.Mutex
	got := map[string]int{} // step/point/column -> effects
	t.Run("cells", func(t *testing.T) {
		for _, c := range columns {
			for _, s := range steps {
				for _, p := range points {
					t.Run(s.name+"/"+p+"/"+c.name, func(t *testing.T) {
						t.Parallel()
						n := crashAndResume(t, bin, b.flags(t, bin), s, p, c.removed)
						mu.Lock()
						got[s.name+"/"+p+"/"+c.name] = n
						mu.Unlock()
						if want := c.want(s.name, p); n != want {
							t.Errorf("%s crashed at %s, %s: %d effect(s), want %d", s.name, p, c.name, n, want)
						}
					})
				}
			}
		}
	})

	var out strings.Builder
	row := "%-9s%-20s%17s%38s\n"
	fmt.Fprintf(&out, row, "step", "crash point", "designed: effects", "no write-ahead, no ref key: effects")
	cell := func(s step, p, col string) string {
		n, ok := got[s.name+"/"+p+"/"+col]
		if !ok {
			return "-" // the run failed before counting
		}
		return fmt.Sprintf("%d %s", n, s.unit)
	}
	for _, s := range steps {
		for _, p := range points {
			fmt.Fprintf(&out, row, s.name, p, cell(s, p, "designed"), cell(s, p, "no_write_ahead"))
		}
	}
	t.Logf("crash matrix on %s (SIGKILL at the point, new process over the same store, resume), %s:\n%s",
		b.name, time.Since(began).Round(100*time.Millisecond), out.String())
}

// fence are every process's token flags: short, so that a reshipment the
// crash left started with no shipment, which may not be sent again while
// a request under one of its tokens could still land, waits seconds.
var fence = []string{"--dispatch-token-ttl", "2s", "--receiver-clock-skew", "1s"}

// crashAndResume runs one cell, both processes with the serve flags store,
// and returns the number of effects the step left in its system of record.
// The restarted process resumes until the step is done: a reshipment the
// crash left started with no shipment waits for its tokens to expire
// (resolve_after) before it is sent again.
func crashAndResume(t *testing.T, bin string, store []string, s step, point, removed string) int {
	dir := t.TempDir()
	env := []string{"COUNTERSIGN_REMOVE_CONTROLS=" + removed}
	store = append(append([]string(nil), store...), fence...)

	first := start(t, bin, dir, store, append(env, "COUNTERSIGN_FAILPOINT="+point))
	before := first.effects(t, s.name)
	first.call(t, http.MethodPost, "/v1/workflows", `{"id":"`+workflowID+`","ticket":"T-crash"}`, http.StatusCreated, nil)
	res, err := first.do(http.MethodPost, "/v1/workflows/"+workflowID+"/steps", s.body)
	if err == nil {
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		t.Fatalf("the step answered %d %s; the process should have died at %s", res.StatusCode, b, point)
	}
	t.Logf("step request ended with: %v", err)
	first.wantKilled(t)
	if !strings.Contains(first.out.String(), "failpoint "+point+" reached") {
		t.Fatalf("the process died without reporting failpoint %s: the kill did not land there", point)
	}

	second := start(t, bin, dir, store, env) // start-up resumes the workflow
	var wf struct {
		Status string
		Steps  []struct {
			Status, Note string
			ResolveAfter string `json:"resolve_after"`
		}
	}
	deadline := time.Now().Add(exitDeadline)
	for {
		second.call(t, http.MethodPost, "/v1/workflows/"+workflowID+"/resume", "", http.StatusOK, &wf)
		if len(wf.Steps) != 1 || wf.Steps[0].Status != "started" || wf.Steps[0].ResolveAfter == "" || time.Now().After(deadline) {
			break
		}
		time.Sleep(pollEvery) // until resolve_after passes: a poll, not an assertion
	}
	if len(wf.Steps) != 1 || wf.Steps[0].Status != "done" {
		t.Errorf("after resume the workflow is %s with steps %+v, want its one step done", wf.Status, wf.Steps)
	}
	n := second.effects(t, s.name) - before
	second.verifyAudit(t)
	second.stop(t)
	return n
}

// verifyAudit checks, as ops-ida, that the audit chain verifies once every
// record the cell wrote is in it (on PostgreSQL the sequencer chains them
// within a period).
func (p *proc) verifyAudit(t *testing.T) {
	t.Helper()
	type verification struct {
		OK          bool
		Records     int
		Unsequenced int
	}
	var v verification
	deadline := time.Now().Add(exitDeadline)
	for {
		v = verification{} // unsequenced is left out at 0
		p.callAs(t, p.ops, http.MethodGet, "/v1/audit/verify", "", http.StatusOK, &v)
		if v.Unsequenced == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(pollEvery)
	}
	if !v.OK || v.Records == 0 || v.Unsequenced != 0 {
		t.Errorf("audit after the cell: ok %v, %d records, %d not sequenced; want a verified chain", v.OK, v.Records, v.Unsequenced)
	}
}

// proc is one `countersign serve --dev` process.
type proc struct {
	cmd    *exec.Cmd
	out    *procs.Output
	done   chan struct{} // closed when Wait returned
	err    error         // Wait's result, once done is closed
	client *http.Client
	ep     struct{ Sidecar, Ledger, Orders string }
	token  string // rep-ana's bearer token
	ops    string // ops-ida's
}

// start runs the binary over dir with extra serve flags and environment and
// waits until it has written dev-endpoints.json (after its start-up resume)
// and the sidecar answers /readyz.
func start(t *testing.T, bin, dir string, flags, env []string) *proc {
	t.Helper()
	endpoints := filepath.Join(dir, "dev-endpoints.json")
	// A previous process's file would announce readiness too early.
	if err := os.Remove(endpoints); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	p := &proc{
		cmd:    exec.Command(bin, append([]string{"serve", "--dev", "--data", dir}, flags...)...),
		out:    &procs.Output{},
		done:   make(chan struct{}),
		client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}},
	}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("output of pid %d (%s):\n%s", p.cmd.Process.Pid, strings.Join(env, " "), p.out.String())
		}
	})

	deadline := time.After(readyDeadline)
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		select {
		case <-p.done:
			t.Fatalf("countersign exited before it was ready: %v", p.err)
		case <-deadline:
			t.Fatalf("countersign not ready after %s", readyDeadline)
		case <-tick.C:
		}
		if p.ready(dir) {
			return p
		}
	}
}

// ready reports whether the endpoints and tokens files are complete and the
// sidecar is ready.
func (p *proc) ready(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "dev-endpoints.json"))
	if err != nil || json.Unmarshal(b, &p.ep) != nil || p.ep.Sidecar == "" {
		return false // not written yet, or written halfway
	}
	var tokens map[string]string
	b, err = os.ReadFile(filepath.Join(dir, "dev-tokens.json"))
	if err != nil || json.Unmarshal(b, &tokens) != nil || tokens["rep-ana"] == "" {
		return false
	}
	p.token, p.ops = tokens["rep-ana"], tokens["ops-ida"]
	res, err := p.client.Get(p.ep.Sidecar + "/readyz")
	if err != nil {
		return false
	}
	res.Body.Close()
	return res.StatusCode == http.StatusOK
}

// do sends an authenticated request to the sidecar as rep-ana.
func (p *proc) do(method, path, body string) (*http.Response, error) {
	return p.doAs(p.token, method, path, body)
}

// doAs sends a request with a bearer token.
func (p *proc) doAs(token, method, path, body string) (*http.Response, error) {
	req, err := http.NewRequest(method, p.ep.Sidecar+path, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	return p.client.Do(req)
}

// call sends a request as rep-ana that must answer want, and decodes the
// body into v.
func (p *proc) call(t *testing.T, method, path, body string, want int, v any) {
	t.Helper()
	p.callAs(t, p.token, method, path, body, want, v)
}

// callAs is call with a bearer token.
func (p *proc) callAs(t *testing.T, token, method, path, body string, want int, v any) {
	t.Helper()
	res, err := p.doAs(token, method, path, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != want {
		t.Fatalf("%s %s: %d %s, want %d", method, path, res.StatusCode, b, want)
	}
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
}

// effects counts the step's effects on O-1001 in its system of record:
// refund entries in the ledger, or shipments in the order system.
func (p *proc) effects(t *testing.T, step string) int {
	t.Helper()
	url := p.ep.Orders + "/orders/O-1001/shipments"
	if step == "refund" {
		url = p.ep.Ledger + "/entries"
	}
	res, err := p.client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	var body struct {
		Entries   []struct{ Kind, Order string }
		Shipments []struct{ Order string }
	}
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", url, res.StatusCode)
	}
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	n := 0
	for _, e := range body.Entries {
		if e.Kind == "refund" && e.Order == "O-1001" {
			n++
		}
	}
	for _, s := range body.Shipments {
		if s.Order == "O-1001" {
			n++
		}
	}
	return n
}

// wantKilled waits for the process and checks that SIGKILL ended it.
func (p *proc) wantKilled(t *testing.T) {
	t.Helper()
	p.wait(t)
	var ee *exec.ExitError
	if !errors.As(p.err, &ee) {
		t.Fatalf("process ended with %v, want death by SIGKILL", p.err)
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("process ended with %v, want death by SIGKILL", ee)
	}
}

// stop sends SIGTERM and checks for a clean exit.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	p.wait(t)
	if p.err != nil {
		t.Fatalf("after SIGTERM the process ended with %v, want exit status 0", p.err)
	}
}

func (p *proc) wait(t *testing.T) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(exitDeadline):
		t.Fatalf("process %d still running after %s", p.cmd.Process.Pid, exitDeadline)
	}
}
