package fleet_test

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
	"testing"
	"time"

	"github.com/countersign/countersign/executor/pgtest"
	"github.com/countersign/countersign/tests/procs"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// Deadlines are generous because the processes share two cores; every wait
// polls for its event and ends as soon as it happens.
const (
	readyDeadline = 90 * time.Second
	pollEvery     = 25 * time.Millisecond
	agent         = "quillfeather-support-agent" // devstack.AgentID
	issuer        = "countersign-dev-idp"        // idp.DefaultIssuer
	// leaseTTL is every sidecar's --lease-ttl: short, so a dead sidecar's
	// workflows are taken over soon.
	leaseTTL = time.Second
)

// fleet is n sidecars on one database: first runs the simulators.
type fleet struct {
	bin     string
	store   string
	keyFile string // the fleet's key-encryption key (serve --key-file)
	first   *proc
	procs   []*proc
	tokens  map[string]string
	// flags are more serve flags, given to every sidecar started after
	// they are set.
	flags []string
}

// newFleet builds the binary and starts n sidecars on a new database.
func newFleet(t *testing.T, n int) *fleet {
	t.Helper()
	f := prepareFleet(t)
	f.startFirst(t, t.TempDir(), nil)
	for range n - 1 {
		f.procs = append(f.procs, f.join(t))
	}
	return f
}

// prepareFleet builds the binary, makes a new database and the fleet's
// key file, starting no sidecar.
func prepareFleet(t *testing.T) *fleet {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary and starts processes")
	}
	f := &fleet{store: pgtest.URL(t), bin: procs.Build(t), keyFile: filepath.Join(t.TempDir(), "fleet.key")}
	if out, err := exec.Command(f.bin, "keyfile", "-o", f.keyFile).CombinedOutput(); err != nil {
		t.Fatalf("countersign keyfile: %v\n%s", err, out)
	}
	return f
}

// startFirst starts `serve --dev` over dir with extra environment: the
// sidecar that runs the simulators and the identity provider. It becomes
// f.first and f.procs[0].
func (f *fleet) startFirst(t *testing.T, dir string, env []string) *proc {
	t.Helper()
	endpoints := filepath.Join(dir, "dev-endpoints.json")
	// A previous process's file would announce readiness too early.
	if err := os.Remove(endpoints); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	p := f.start(t, dir, env, "--dev", "--data", dir)
	p.waitFile(t, endpoints, &p.ep)
	p.waitFile(t, filepath.Join(dir, "dev-tokens.json"), &f.tokens)
	p.waitReady(t)
	f.first = p
	if len(f.procs) == 0 {
		f.procs = []*proc{p}
	} else {
		f.procs[0] = p
	}
	return p
}

// join starts a sidecar with the production flags against the first
// sidecar's systems and identity provider, with extra environment env.
func (f *fleet) join(t *testing.T, env ...string) *proc {
	t.Helper()
	return f.joinAt(t, t.TempDir(), env...)
}

// joinAt is join over data directory dir: a sidecar restarted over the
// directory of one that was killed.
func (f *fleet) joinAt(t *testing.T, dir string, env ...string) *proc {
	t.Helper()
	ep := f.first.ep
	p := f.start(t, dir, env, "--agent", agent, "--ledger", ep.Ledger, "--orders", ep.Orders,
		"--issuer", issuer, "--issuer-jwks", ep.IssuerJWKS, "--data", dir)
	p.ep = ep
	p.ep.Sidecar = p.waitListening(t)
	p.waitReady(t)
	return p
}

// start runs `countersign serve --listen 127.0.0.1:0 --store URL
// --lease-ttl 1s args...`.
func (f *fleet) start(t *testing.T, dir string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{
		out:    &procs.Output{},
		done:   make(chan struct{}),
		client: &http.Client{Timeout: 60 * time.Second},
	}
	args = append(append([]string{"serve", "--listen", "127.0.0.1:0", "--store", f.store, "--key-file", f.keyFile,
		"--lease-ttl", leaseTTL.String()}, f.flags...), args...)
	p.cmd = exec.Command(f.bin, args...)
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
			t.Logf("output of pid %d (%s):\n%s", p.cmd.Process.Pid, dir, p.out.String())
		}
	})
	return p
}

// proc is one serve process.
type proc struct {
	cmd    *exec.Cmd
	out    *procs.Output
	done   chan struct{}
	err    error
	client *http.Client
	ep     endpoints
}

// endpoints are the first sidecar's dev-endpoints.json.
type endpoints struct {
	Sidecar    string `json:"sidecar"`
	Ledger     string `json:"ledger"`
	Orders     string `json:"orders"`
	IssuerJWKS string `json:"issuer_jwks"`
}

// until polls ok until it holds, the process ends or the deadline passes.
func (p *proc) until(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.After(readyDeadline)
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for !ok() {
		select {
		case <-p.done:
			t.Fatalf("countersign exited before %s: %v", what, p.err)
		case <-deadline:
			t.Fatalf("countersign: no %s after %s", what, readyDeadline)
		case <-tick.C:
		}
	}
}

// waitFile waits until the JSON file at path is complete and decodes it.
func (p *proc) waitFile(t *testing.T, path string, v any) {
	t.Helper()
	p.until(t, path, func() bool {
		b, err := os.ReadFile(path)
		return err == nil && json.Unmarshal(b, v) == nil
	})
}

// waitListening reads the sidecar's URL from the line serve prints.
func (p *proc) waitListening(t *testing.T) string {
	t.Helper()
	var url string
	p.until(t, "its address", func() bool {
		_, rest, ok := strings.Cut(p.out.String(), "countersign sidecar on ")
		if !ok {
			return false
		}
		url, _, ok = strings.Cut(rest, ";")
		return ok
	})
	return url
}

func (p *proc) waitReady(t *testing.T) {
	t.Helper()
	p.until(t, "readiness", func() bool {
		res, err := p.client.Get(p.ep.Sidecar + "/readyz")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	})
}

// do sends a request with token; status 0 means no answer came.
func (p *proc) do(token, method, path, body string, v any) (int, error) {
	req, err := http.NewRequest(method, p.ep.Sidecar+path, strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := p.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return res.StatusCode, err
	}
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			return res.StatusCode, fmt.Errorf("%w in %s", err, b)
		}
	}
	return res.StatusCode, nil
}

// call sends a request that must answer want.
func (p *proc) call(t *testing.T, token, method, path, body string, want int, v any) {
	t.Helper()
	var raw json.RawMessage
	status, err := p.do(token, method, path, body, &raw)
	if err != nil || status != want {
		t.Fatalf("%s %s%s: %d %s %v, want %d", method, p.ep.Sidecar, path, status, raw, err, want)
	}
	if v != nil {
		if err := json.Unmarshal(raw, v); err != nil {
			t.Fatalf("%s %s: %v in %s", method, path, err, raw)
		}
	}
}

// ledgerEntries are the ledger's refund entries of order.
func (p *proc) ledgerEntries(t *testing.T, order string) []ledgerEntry {
	t.Helper()
	res, err := p.client.Get(p.ep.Ledger + "/entries")
	if err != nil {
		t.Fatalf("GET ledger entries: %v", err)
	}
	defer res.Body.Close()
	var body struct{ Entries []ledgerEntry }
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
		t.Fatalf("GET ledger entries: %v", err)
	}
	var out []ledgerEntry
	for _, e := range body.Entries {
		if e.Kind == "refund" && e.Order == order {
			out = append(out, e)
		}
	}
	return out
}

type ledgerEntry struct{ ID, Kind, Order, Key string }

// step is what the tests read of a step's answer.
type step struct {
	N        int
	Tool     string
	Args     struct{ Order string }
	Status   string
	Rule     string
	Approval *struct{ ID, Status string }
}

// verifyAudit waits until the fleet's sequencer has chained every audit
// record written so far (none left unsequenced), then checks that the
// chain verifies and holds records.
func (p *proc) verifyAudit(t *testing.T, token string) {
	t.Helper()
	type verification struct {
		OK          bool
		Records     int
		Unsequenced int
	}
	var verify verification
	p.until(t, "every audit record sequenced", func() bool {
		verify = verification{} // unsequenced is left out at 0
		p.call(t, token, http.MethodGet, "/v1/audit/verify", "", http.StatusOK, &verify)
		return verify.Unsequenced == 0
	})
	if !verify.OK || verify.Records == 0 {
		t.Errorf("the fleet's audit chain does not verify: ok %v, %d records", verify.OK, verify.Records)
	}
}

// auditCoversDecisions checks that every decision of workflow wf names,
// as its audit_pending, the number a chained decision record of the same
// step kept as its pending: on a fleet the record is chained after the
// decision commits, and the number is how a reviewer finds it.
func (p *proc) auditCoversDecisions(t *testing.T, token, wf string) {
	t.Helper()
	var decisions struct {
		Decisions []struct {
			N            int    `json:"n"`
			AuditPending uint64 `json:"audit_pending"`
		} `json:"decisions"`
	}
	p.call(t, token, http.MethodGet, "/v1/decisions?workflow="+wf, "", http.StatusOK, &decisions)
	var page struct {
		Records []struct {
			Kind, Workflow string
			N              int
			Pending        uint64
		} `json:"records"`
	}
	p.call(t, token, http.MethodGet, "/v1/audit?limit=1000", "", http.StatusOK, &page)
	if len(decisions.Decisions) == 0 {
		t.Fatalf("%s has no decision", wf)
	}
	for _, d := range decisions.Decisions {
		found := false
		for _, r := range page.Records {
			if d.AuditPending != 0 && r.Pending == d.AuditPending {
				found = r.Kind == "decision" && r.Workflow == wf && r.N == d.N
				break
			}
		}
		if !found {
			t.Errorf("%s/%d's decision names audit_pending %d, and no chained decision record of that step kept it", wf, d.N, d.AuditPending)
		}
	}
}
