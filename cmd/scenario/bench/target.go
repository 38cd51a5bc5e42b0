package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/countersign/countersign/cmd/devstack"
	"github.com/countersign/countersign/cmd/scenario/bench/latency"
	"github.com/countersign/countersign/executor/store"
)

// target is the stack a bench drives and what it can read of it.
type target struct {
	// desc names the target in the report's header.
	desc     string
	revision string
	// sidecars are the base URLs agents are spread over, round-robin.
	sidecars []string
	orders   string
	tokens   map[string]string
	client   *http.Client
	// files count the commits of each bbolt file; empty out of process.
	files []commitSource
	// stack is the in-process stack; nil out of process. With a store on
	// PostgreSQL it is the fleet's first sidecar, which also runs the
	// simulators and the identity provider.
	stack *devstack.Stack
	// stores are the sidecars' stores, whose retries are read; with a
	// store on PostgreSQL (shared) each sidecar's handle counts only its
	// own commits, so they are summed.
	stores []*store.DB
	shared bool
	// proxy stands between the sidecars and PostgreSQL (shared only).
	proxy *latency.Proxy
	// run tags every workflow id, ticket and idempotency key of this run.
	run       string
	nextOrder atomic.Uint64
}

// commitSource reads one bbolt file's last committed transaction id.
type commitSource struct {
	name string
	read func() (uint64, error)
}

// openTarget starts the in-process dev stack, or reads what a running
// dev sidecar wrote into its data directory.
func openTarget(ctx context.Context, o Options) (*target, func() error, error) {
	t := newTarget()
	if o.Sidecar != "" {
		return t, func() error { return nil }, t.readDevFiles(o)
	}
	dir, remove, err := tempDir(o.DataDir)
	if err != nil {
		return nil, nil, err
	}
	st, err := devstack.Start(ctx, devstack.Options{DataDir: dir, Logger: o.Logger})
	if err != nil {
		return nil, nil, errors.Join(fmt.Errorf("bench: start the dev stack: %w", err), remove())
	}
	t.stack, t.sidecars, t.orders, t.tokens = st, []string{st.URL}, st.Endpoints.Orders, st.Tokens
	t.stores = []*store.DB{st.Store}
	t.revision = st.Policy.Revision()
	t.desc = fmt.Sprintf("in-process dev stack on loopback (policy deadline %v)", devstack.InProcessPolicyTimeout)
	t.files = []commitSource{
		{"sidecar store", st.Store.Commits},
		{"ledger", st.Ledger.Commits},
		{"orders", st.Orders.Commits},
	}
	return t, func() error { return errors.Join(st.Close(), remove()) }, nil
}

func newTarget() *target {
	t := &target{client: newClient(), run: runID()}
	// Order ids are O- and 12 digits: 9, the run's start second modulo
	// 100,000, then a counter; so runs on one sidecar rarely meet, and
	// renewOrder skips an id that exists all the same.
	t.nextOrder.Store(900_000_000_000 + uint64(time.Now().Unix()%100_000)*1_000_000)
	return t
}

// readDevFiles takes the tokens and the order system's address from the
// files `serve --dev` wrote.
func (t *target) readDevFiles(o Options) error {
	var ep devstack.Endpoints
	if err := readJSON(filepath.Join(o.DataDir, "dev-endpoints.json"), &ep); err != nil {
		return err
	}
	if err := readJSON(filepath.Join(o.DataDir, "dev-tokens.json"), &t.tokens); err != nil {
		return err
	}
	if err := loopback(ep.Orders); err != nil {
		return fmt.Errorf("bench: the order system of %s: %w", o.DataDir, err)
	}
	t.sidecars, t.orders = []string{o.Sidecar}, ep.Orders
	t.revision = "the sidecar's active bundle"
	t.desc = "sidecar at " + o.Sidecar + " (out of process)"
	return nil
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("bench: %w (is the sidecar running with serve --dev --data on that directory?)", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("bench: %s: %w", path, err)
	}
	return nil
}

// newClient keeps a connection per agent alive: without it 64 agents
// would open a connection for most requests and measure the handshakes.
func newClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 4*MaxAgents, 2*MaxAgents
	return &http.Client{Transport: tr, Timeout: requestTimeout}
}

func runID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// commits reads every file's commit count.
func (t *target) commits() (map[string]uint64, error) {
	out := make(map[string]uint64, len(t.files))
	for _, f := range t.files {
		n, err := f.read()
		if err != nil {
			return nil, fmt.Errorf("bench: read the commits of %s: %w", f.name, err)
		}
		out[f.name] = n
	}
	return out, nil
}

// errorAnswer is the error object of the sidecar's and the simulators'
// answers.
type errorAnswer struct {
	Code string `json:"code"`
}

// post sends body as JSON and decodes the answer into out. A non-nil
// error means no answer was read; any status is an answer.
func (t *target) post(ctx context.Context, url, token string, header http.Header, body, out any) (int, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	return t.do(req, token, header, out)
}

// get reads url and decodes the answer into out, as post does.
func (t *target) get(ctx context.Context, url, token string, out any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	return t.do(req, token, nil, out)
}

func (t *target) do(req *http.Request, token string, header http.Header, out any) (int, error) {
	for k, v := range header {
		req.Header[k] = v
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := t.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, err
	}
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			return resp.StatusCode, fmt.Errorf("answer %d unreadable: %w", resp.StatusCode, err)
		}
	}
	return resp.StatusCode, nil
}
