package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"testing/fstest"
	"time"

	"github.com/countersign/countersign/bundles"
	"github.com/countersign/countersign/executor/audit"
	"github.com/countersign/countersign/executor/credential"
	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/fixture"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/sim/ledger"
	"github.com/countersign/countersign/executor/sim/orders"
	"github.com/countersign/countersign/executor/sim/simserver"
	"github.com/countersign/countersign/executor/simclock"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/systems"
	"github.com/countersign/countersign/executor/tool"
)

// begin is the simulated clock's reading when every world begins.
var begin = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

// The failpoints the engine calls (engine.Options.Failpoint).
var failpoints = []string{"before_dispatch", "after_dispatch", "after_record"}

// agent is the act.sub of every actor token.
const agent = "sim-agent"

// world is one seed's systems: the sidecar's engine on a bbolt file, the
// ledger and the order system behind the simulated network, the
// credential authority, one clock, and what the harness remembers to
// check the invariants.
type world struct {
	seed     uint64
	rng      *rand.Rand
	clock    *simclock.Clock
	dir      string
	controls engine.Controls
	limits   policy.Limits
	// skew is how far the receivers' clocks are behind the sidecar's.
	skew time.Duration

	pol    *policy.Engine
	auth   *credential.Authority
	ledger *ledger.Server
	orders *orders.Server
	net    *network
	sys    *systems.Systems
	audit  *audit.Log
	db     *store.DB
	eng    *engine.Engine

	trace *trace

	// The harness's model of the world.
	orderList []orders.Order
	workflows []workflow
	switches  map[tool.Name]bool
	// acked are the steps the engine answered done, by workflow/n.
	acked map[string]stepRef
	// dispatched are the effects sent (refunds by key, reships by
	// reference), with whether the tool was on when first sent.
	dispatched map[string]bool
	// armed is the failpoint at which the engine crashes next ("": none).
	armed    string
	last     lastCall
	restarts int
	// violations found during the run (checked where they happen).
	violations []Violation
}

// stepRef names a step.
type stepRef struct {
	wf string
	n  int
}

type workflow struct {
	id  string
	rep string
}

// open builds a world for seed in a fresh directory under parent.
func open(seed uint64, parent string, controls engine.Controls, shared *shared) (*world, error) {
	dir, err := os.MkdirTemp(parent, fmt.Sprintf("seed-%d-", seed))
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	w := &world{
		seed: seed, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), clock: simclock.New(begin),
		dir: dir, controls: controls, trace: newTrace(),
		switches: map[tool.Name]bool{tool.IssueRefund: true, tool.ReshipOrder: true},
		acked:    map[string]stepRef{}, dispatched: map[string]bool{},
	}
	if err := w.build(shared); err != nil {
		w.close()
		return nil, err
	}
	return w, nil
}

// shared is what every world of a process can share because no world
// changes it: the parsed bundle.
type shared struct {
	bundle *policy.Bundle
}

// The caps of the simulation's bundle, in place of p1's $1,000 per rep
// per day and $3,000 per agent hour, which a seed's few refunds would
// never reach: these bind in most seeds, so the caps' invariants are
// tested, not merely held.
const (
	simRepDaily    = 40000
	simAgentHourly = 50000
)

// newShared loads the embedded bundle p1 with the simulation's caps in
// its data (its revision stays p1's).
func newShared() (*shared, error) {
	src, err := bundles.Open("p1")
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	fsys := fstest.MapFS{}
	err = fs.WalkDir(src, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(src, path)
		if err == nil && path == "data.json" {
			b, err = withCaps(b)
		}
		fsys[path] = &fstest.MapFile{Data: b, Mode: 0o644}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sim: bundle p1: %w", err)
	}
	b, err := policy.LoadFS(fsys)
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	return &shared{bundle: b}, nil
}

// withCaps is a bundle's data.json with the simulation's caps.
func withCaps(raw []byte) ([]byte, error) {
	var data struct {
		Countersign struct {
			Limits map[string]json.Number `json:"limits"`
		} `json:"countersign"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	if err := dec.Decode(&data); err != nil {
		return nil, fmt.Errorf("data.json: %w", err)
	}
	if data.Countersign.Limits == nil {
		return nil, errors.New("data.json has no countersign.limits")
	}
	data.Countersign.Limits["rep_daily"] = json.Number(fmt.Sprint(simRepDaily))
	data.Countersign.Limits["agent_hourly"] = json.Number(fmt.Sprint(simAgentHourly))
	return json.Marshal(data)
}

func (w *world) build(sh *shared) error {
	w.pol = policy.New(policy.Options{Clock: w.clock, Timeout: 30 * time.Second,
		UnrestrictedBuiltins: !w.controls.RestrictedBuiltins, LimitOnlyLoosening: !w.controls.TwoPersonLoosening})
	if err := w.pol.Restore(sh.bundle); err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	limits, err := w.pol.Limits()
	if err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	w.limits = limits
	if w.auth, err = credential.Open(credential.Options{Dir: w.dir, Clock: w.clock}); err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	// The receivers' clocks run up to 2 s ahead of the sidecar's or up
	// to the skew the engine allows for (engine.DefaultReceiverSkew)
	// behind it.
	w.skew = time.Duration(w.rng.Int64N(int64(engine.DefaultReceiverSkew+2*time.Second))) - 2*time.Second
	theirs := skewed{w.clock, w.skew}
	simOpts := func(name string) simserver.Options {
		return simserver.Options{DataDir: filepath.Join(w.dir, name), Keys: w.auth.JWKS(), Clock: theirs, NoSync: true,
			AllowTokenReplay: !w.controls.SingleUseTokens}
	}
	w.orderList = w.makeOrders()
	if w.orders, err = orders.Open(orders.Options{Options: simOpts("orders"), Orders: w.orderList,
		NoReferenceKey: !w.controls.ReferenceKeys}); err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	if w.ledger, err = ledger.Open(ledger.Options{Options: simOpts("ledger")}); err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	w.net = &network{w: w, routes: map[string]http.Handler{"ledger.sim": w.ledger, "orders.sim": w.orders}}
	if w.sys, err = systems.New(systems.Options{LedgerURL: "http://ledger.sim", OrdersURL: "http://orders.sim",
		HTTPClient: &http.Client{Transport: w.net}, Minter: w.auth, Agent: agent, AttemptTimeout: time.Minute}); err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	w.audit = audit.New(audit.Options{Clock: w.clock, Entropy: rand.NewChaCha8(seedBytes(w.seed))})
	return w.start()
}

// makeOrders draws the world's orders: paid between $30 and $600, so
// that refunds come near what was paid, and shipped but for a few.
func (w *world) makeOrders() []orders.Order {
	var out []orders.Order
	for i := range 6 {
		region := []string{"EU", "US"}[i%2]
		status := fixture.StatusShipped
		if w.rng.IntN(6) == 0 {
			status = fixture.StatusPaid
		}
		out = append(out, orders.Order{ID: fmt.Sprintf("O-%d", 101+i), Region: region,
			Customer: fmt.Sprintf("customer-%d", i+1), Paid: 3000 + w.rng.Int64N(57000), Status: status})
	}
	return out
}

// start opens the store and an engine over it, as a sidecar starting
// does. It does not resume: restart does.
func (w *world) start() error {
	db, err := store.Open(filepath.Join(w.dir, "state.db"), store.Options{NoSync: true})
	if err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	w.db = db
	c := w.controls
	w.eng = engine.New(engine.Options{Store: db, Policy: w.pol, Systems: recorder{w: w}, Clock: w.clock,
		Agent: agent, Controls: &c, Failpoint: w.failpoint, Audit: w.audit})
	return nil
}

// failpoint crashes the engine at the armed point, once.
func (w *world) failpoint(point string) error {
	if w.armed != point {
		return nil
	}
	w.armed = ""
	w.tracef("crash at %s", point)
	return engine.ErrCrashed
}

// restart stops the engine as a crash would (nothing more is done for
// the step in hand; what the store had been given is durable, see the
// package doc), opens a new engine over the same file and resumes every
// open workflow. A crash during that resume restarts again.
func (w *world) restart(ctx context.Context) error {
	for {
		w.restarts++
		w.stop()
		if err := w.start(); err != nil {
			return err
		}
		w.checkAcked("restart")
		err := w.eng.ResumeAll(ctx)
		w.db.Flush()
		w.tracef("restart %d: resume all: %s", w.restarts, errClass(err))
		if !errors.Is(err, engine.ErrCrashed) {
			return nil
		}
	}
}

// stop closes the engine and its store.
func (w *world) stop() {
	if w.eng != nil {
		w.eng.Close()
		w.eng = nil
	}
	if w.db != nil {
		w.db.Close()
		w.db = nil
	}
}

// close releases everything and removes the world's directory.
func (w *world) close() {
	w.stop()
	if w.ledger != nil {
		w.ledger.Close()
	}
	if w.orders != nil {
		w.orders.Close()
	}
	os.RemoveAll(w.dir)
}

func seedBytes(seed uint64) [32]byte {
	var b [32]byte
	for i := range 8 {
		b[i] = byte(seed >> (8 * i))
	}
	copy(b[8:], "countersign seeded simulation")
	return b
}

// recorder is the engine's Systems: the real client over the simulated
// network, watched where the engine sends an effect.
type recorder struct{ w *world }

var _ engine.Systems = recorder{}

func (r recorder) Order(ctx context.Context, as engine.Actor, order string) (policy.Order, error) {
	return r.w.sys.Order(ctx, as, order)
}

func (r recorder) Shipments(ctx context.Context, order string) (int, error) {
	return r.w.sys.Shipments(ctx, order)
}

func (r recorder) RefundByKey(ctx context.Context, key string) (json.RawMessage, bool, error) {
	return r.w.sys.RefundByKey(ctx, key)
}

func (r recorder) ShipmentByReference(ctx context.Context, order, ref string) (json.RawMessage, bool, error) {
	return r.w.sys.ShipmentByReference(ctx, order, ref)
}

// Execute notes the first sending of each effect, and whether its tool
// was switched on at that moment, before sending it.
func (r recorder) Execute(ctx context.Context, as engine.Actor, c engine.Call) (json.RawMessage, error) {
	id := c.Key
	if c.Tool == tool.ReshipOrder {
		id = c.Reference
	}
	if _, seen := r.w.dispatched[id]; !seen {
		on := r.w.switches[c.Tool]
		r.w.dispatched[id] = on
		if !on {
			r.w.violate(InvSwitch, "%s on %s first sent while %s was switched off", c.Tool, c.Args.Order, c.Tool)
		}
	}
	r.w.tracef("execute %s %s %d", c.Tool, c.Args.Order, c.Args.Amount)
	return r.w.sys.Execute(ctx, as, c)
}

func (r recorder) Reverse(ctx context.Context, as engine.Actor, entry, key string) (json.RawMessage, error) {
	return r.w.sys.Reverse(ctx, as, entry, key)
}

// skewed is a clock behind another by a fixed amount (ahead when
// negative).
type skewed struct {
	c      *simclock.Clock
	behind time.Duration
}

func (s skewed) Now() time.Time { return s.c.Now().Add(-s.behind) }
