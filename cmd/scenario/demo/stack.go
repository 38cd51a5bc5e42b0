package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/countersign/countersign/cmd/devstack"
	"github.com/countersign/countersign/executor/credential"
	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/fixture"
	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/sim/ledger"
	"github.com/countersign/countersign/executor/simclock"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

// newClock is the simulated clock a scenario runs on, standing at the
// present second: time moves only when the scenario moves it, so an expiry
// is shown without anybody waiting 1000 s.
func newClock() *simclock.Clock {
	return simclock.New(time.Now().UTC().Truncate(time.Second))
}

// setup is how a scenario wants its stack.
type setup struct {
	controls  engine.Controls
	clock     *simclock.Clock
	failpoint func(string) error
	// attemptTimeout bounds each call to a system of record (default 10 s).
	attemptTimeout time.Duration
}

// stack is one running devstack with the helpers the scenarios share.
// Scenarios drive the engine in process and, where the HTTP answer is the
// point, the sidecar's API; they count effects in the systems of record.
type stack struct {
	*devstack.Stack
	clock  *simclock.Clock
	hc     *http.Client
	closed bool
}

// Close stops the stack once; a second Close does nothing.
func (s *stack) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	return s.Stack.Close()
}

// start brings up a stack over dir. A dir that holds a stack's data is
// resumed, as a restarted process would resume it.
func start(ctx context.Context, dir string, s setup) (*stack, error) {
	if s.clock == nil {
		s.clock = newClock()
	}
	c := s.controls
	o := devstack.Options{DataDir: dir, Clock: s.clock, Controls: &c, Failpoint: s.failpoint, AttemptTimeout: s.attemptTimeout}
	if b, ok := ctx.Value(backendKey{}).(*Backend); ok {
		url, err := b.database(dir)
		if err != nil {
			return nil, err
		}
		o.StoreURL, o.KeyEncryptionKey = url, b.KeyEncryptionKey
	}
	st, err := devstack.Start(ctx, o)
	if err != nil {
		if st != nil { // up, but the resume at start failed
			st.Close()
		}
		return nil, fmt.Errorf("start the stack in %s: %w", dir, err)
	}
	return &stack{Stack: st, clock: s.clock, hc: &http.Client{Timeout: 30 * time.Second}}, nil
}

// Backend puts the store of every stack a scenario starts in PostgreSQL,
// as a fleet's sidecar keeps it, instead of bbolt under the stack's
// directory. The simulators and the identity provider stay in the
// directory.
type Backend struct {
	// NewDatabase returns the URL of a new, empty database.
	NewDatabase func() (string, error)
	// KeyEncryptionKey seals the signing keys in every database.
	KeyEncryptionKey *credential.KeyEncryptionKey

	mu   sync.Mutex
	urls map[string]string // by stack directory
}

type backendKey struct{}

// WithBackend returns ctx carrying b: the scenarios run under ctx put
// their stores in b's databases, one per stack directory, so that a stack
// restarted over a directory finds the store it left.
func WithBackend(ctx context.Context, b *Backend) context.Context {
	return context.WithValue(ctx, backendKey{}, b)
}

// database is the URL of dir's database, made on first use.
func (b *Backend) database(dir string) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if url, ok := b.urls[dir]; ok {
		return url, nil
	}
	url, err := b.NewDatabase()
	if err != nil {
		return "", fmt.Errorf("a database for the stack in %s: %w", dir, err)
	}
	if b.urls == nil {
		b.urls = map[string]string{}
	}
	b.urls[dir] = url
	return url, nil
}

// subdir makes a fresh directory for one stack under parent.
func subdir(parent, name string) (string, error) {
	d, err := os.MkdirTemp(parent, name+"-")
	if err != nil {
		return "", fmt.Errorf("data dir for %s: %w", name, err)
	}
	return d, nil
}

// person is a fixture person as the engine authenticates them.
func person(id string) engine.Person {
	p, ok := fixture.PersonByID(id)
	if !ok {
		panic("demo: no fixture person " + id) // a typo in this package, not an input
	}
	return engine.Person{ID: p.ID, Role: p.Role, Region: p.Region, Scopes: p.Scopes,
		RefundCeiling: p.RefundCeiling, ApproveLimit: p.ApproveLimit}
}

func refundArgs(order string, amount money.Cents) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"order":%q,"amount":%d}`, order, amount))
}

func orderArgs(order string) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"order":%q}`, order))
}

// open opens workflow wf for rep.
func (s *stack) open(ctx context.Context, rep, wf string) error {
	if _, _, err := s.Engine.CreateWorkflow(ctx, person(rep), wf, "T-"+wf); err != nil {
		return fmt.Errorf("open workflow %s for %s: %w", wf, rep, err)
	}
	return nil
}

// propose is the agent proposing one call in wf for rep.
func (s *stack) propose(ctx context.Context, rep, wf string, name tool.Name, args json.RawMessage) (store.Step, error) {
	st, err := s.Engine.Propose(ctx, person(rep), wf, name, args)
	if err != nil {
		return st, fmt.Errorf("%s proposes %s %s in %s: %w", rep, name, args, wf, err)
	}
	return st, nil
}

// step reads step n of wf as it is recorded now.
func (s *stack) step(ctx context.Context, wf string, n int) (store.Step, error) {
	_, steps, err := s.Engine.Workflow(ctx, person("ops-ida"), wf)
	if err != nil {
		return store.Step{}, err
	}
	if n < 1 || n > len(steps) {
		return store.Step{}, fmt.Errorf("workflow %s has no step %d", wf, n)
	}
	return steps[n-1], nil
}

// refunds are the agent refunds the ledger holds (its own entries, not
// the engine's records).
func (s *stack) refunds() ([]ledger.Entry, error) {
	all, err := s.Ledger.Entries()
	if err != nil {
		return nil, err
	}
	var out []ledger.Entry
	for _, e := range all {
		if e.Kind == ledger.KindRefund {
			out = append(out, e)
		}
	}
	return out, nil
}

// shipments counts the order system's shipments of order.
func (s *stack) shipments(order string) (int, error) {
	list, err := s.Orders.Shipments(order)
	return len(list), err
}

// post sends an authenticated JSON request to the sidecar as who and
// returns the status and the body.
func (s *stack) post(ctx context.Context, who, path string, body any) (int, []byte, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.Endpoints.Sidecar+path, bytes.NewReader(b))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+s.Tokens[who])
	req.Header.Set("Content-Type", "application/json")
	res, err := s.hc.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("POST %s: %w", path, err)
	}
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	return res.StatusCode, out, err
}

// errorCode is error.code of an error body, "" when there is none.
func errorCode(body []byte) string {
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	return e.Error.Code
}

// stepStatus is the status of a step answer, "" when there is none.
func stepStatus(body []byte) string {
	var s struct {
		Status string `json:"status"`
	}
	_ = json.Unmarshal(body, &s)
	return s.Status
}

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}
