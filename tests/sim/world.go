package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/countersign/countersign/executor/audit"
	"github.com/countersign/countersign/executor/clock"
	"github.com/countersign/countersign/executor/credential"
	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/fixture"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/release"
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

// world is one seed's systems: one sidecar's engine on a bbolt file, or a
// fleet of two or three on one store; the ledger and the order system
// behind the simulated network; the credential authority; one clock; and
// what the harness remembers to check the invariants.
type world struct {
	seed     uint64
	rng      *rand.Rand
	clock    *simclock.Clock
	dir      string
	controls engine.Controls
	limits   policy.Limits
	shared   *shared
	// skew is how far the receivers' clocks are behind the world's.
	skew time.Duration
	// fleet: the sidecars share one store under leases (fleet.go).
	fleet bool
	// releases: this seed's operators activate and roll back bundles
	// (bundles.go); few seeds do, since each activation runs the gate.
	releases bool

	auth     *credential.Authority
	ledger   *ledger.Server
	orders   *orders.Server
	net      *network
	audit    *audit.Log
	db       *store.DB
	sidecars []*sidecar

	trace *trace

	// The harness's model of the world.
	orderList []orders.Order
	workflows []workflow
	switches  map[tool.Name]bool
	// acked are the steps a sidecar answered done, by workflow/n.
	acked map[string]ack
	// dispatched are the effects sent (refunds by key, reships by
	// reference), with whether the tool was on when first sent.
	dispatched map[string]bool
	// armed is the failpoint at which a sidecar crashes next ("": none);
	// crashed is the sidecar that did.
	armed   string
	crashed *sidecar
	// storeDown fails every write of the store until the event ends;
	// downAt is the failpoint (or "call") at which it goes down next.
	storeDown bool
	downAt    string
	// bundle is the harness's view of the operators' releases.
	bundle   releaseState
	last     lastCall
	restarts int
	// violations found during the run (checked where they happen).
	violations []Violation
}

// sidecar is one engine of the world with what a sidecar process holds
// beside it: its policy engine and release service, and in a fleet its
// own clock and lease holder id. A restart makes all of them new.
type sidecar struct {
	name string
	// ahead is how far its clock runs ahead of the world's (a fleet's
	// sidecars are skewed from each other; one sidecar is not).
	ahead  time.Duration
	clock  clock.Clock
	starts int
	holder string
	pol    *policy.Engine
	rel    *release.Service
	sys    *systems.Systems
	eng    *engine.Engine
	// paused is its call held up mid-dispatch (fleet.go); nil: none.
	paused *paused
}

// ack is a step a sidecar answered done; lost when the store was failing
// writes as it answered, so that its record may not have committed
// (resume resolves it: checked after settling, not at each restart).
type ack struct {
	ref  stepRef
	lost bool
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
		dir: dir, controls: controls, trace: newTrace(), shared: shared,
		switches: map[tool.Name]bool{tool.IssueRefund: true, tool.ReshipOrder: true},
		acked:    map[string]ack{}, dispatched: map[string]bool{},
	}
	if err := w.build(); err != nil {
		w.close()
		return nil, err
	}
	return w, nil
}

// shared is what every world of a process can share because no world
// changes it: the parsed bundles.
type shared struct {
	bundles simBundles
}

// The caps of the simulation's bundle, in place of p1's $1,000 per rep
// per day and $3,000 per agent hour, which a seed's few refunds would
// never reach: these bind in most seeds, so the caps' invariants are
// tested, not merely held. They are no lower than p1's maximum refund,
// so that the gate's case "a refund at the maximum needs an approval"
// holds and the sim's variants of it pass the gate (bundles.go).
const (
	simRepDaily    = 50000
	simAgentHourly = 50000
)

// newShared loads the simulation's bundles (bundles.go).
func newShared() (*shared, error) {
	b, err := loadBundles()
	if err != nil {
		return nil, err
	}
	return &shared{bundles: b}, nil
}

// withCaps is a bundle's data.json with the simulation's caps, and each
// limit named in more set as given.
func withCaps(raw []byte, more map[string]int64) ([]byte, error) {
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
	for name, v := range more {
		if _, ok := data.Countersign.Limits[name]; !ok {
			return nil, fmt.Errorf("data.json has no limit %s", name)
		}
		data.Countersign.Limits[name] = json.Number(fmt.Sprint(v))
	}
	return json.Marshal(data)
}

func (w *world) build() error {
	w.limits = w.shared.bundles.base.Limits()
	var err error
	if w.auth, err = credential.Open(credential.Options{Dir: w.dir, Clock: w.clock}); err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	// The receivers' clocks run up to 1 s ahead of the world's or up to
	// 4 s behind it; a fleet's sidecars run up to 1 s either side of it.
	// So every receiver is within the skew the engine allows for
	// (engine.DefaultReceiverSkew, 5 s behind) and 2 s ahead of every
	// sidecar, as the receivers' own check of iat allows.
	w.skew = time.Duration(w.rng.Int64N(int64(5*time.Second))) - time.Second
	w.fleet = w.rng.IntN(2) == 0
	w.releases = w.rng.IntN(releaseSeeds) == 0
	theirs := skewed{w.clock, w.skew}
	keys := &http.Client{Transport: keysTransport{w.auth.JWKSHandler()}}
	simOpts := func(name string) simserver.Options {
		// The receivers fetch the sidecar's keys for every request
		// (JWKSMaxAge 0), so a raised epoch bites at once.
		return simserver.Options{DataDir: filepath.Join(w.dir, name), JWKSURL: "http://sidecar.sim/.well-known/jwks.json",
			HTTPClient: keys, Clock: theirs, NoSync: true, AllowTokenReplay: !w.controls.SingleUseTokens}
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
	w.audit = audit.New(audit.Options{Clock: w.clock, Entropy: rand.NewChaCha8(seedBytes(w.seed))})
	n := 1
	if w.fleet {
		n = 2 + w.rng.IntN(2)
	}
	for i := range n {
		sc := &sidecar{name: fmt.Sprintf("s%d", i+1)}
		if w.fleet {
			sc.ahead = time.Duration(w.rng.Int64N(int64(2*time.Second))) - time.Second
		}
		sc.clock = skewed{w.clock, -sc.ahead}
		w.sidecars = append(w.sidecars, sc)
	}
	if err := w.openStore(); err != nil {
		return err
	}
	// The store starts as a sidecar leaves it once an operator activated
	// the simulation's p1: recorded as the active bundle without running
	// the gate (about half a second) in every seed.
	if err := (release.History{DB: w.db, Log: w.audit}).Record(context.Background(), policy.HistoryRecord{
		Revision: w.shared.bundles.base.Revision(), Digest: w.shared.bundles.base.Digest(), Status: policy.StatusActive,
		By: "ops-ida", At: w.clock.Now(), Bundle: w.shared.bundles.base.Archive(),
	}); err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	for _, sc := range w.sidecars {
		if err := w.start(sc); err != nil {
			return err
		}
	}
	return nil
}

// makeOrders draws the world's orders: paid between $30 and $600, so
// that refunds come near what was paid, but for one of each region paid
// $500 to $900, above a rep's $500 ceiling (so that a refund near what it
// paid meets the ceiling); shipped but for a few.
func (w *world) makeOrders() []orders.Order {
	var out []orders.Order
	for i := range 6 {
		region := []string{"EU", "US"}[i%2]
		status := fixture.StatusShipped
		if w.rng.IntN(6) == 0 {
			status = fixture.StatusPaid
		}
		paid := 3000 + w.rng.Int64N(57000)
		if i < 2 {
			paid = 50000 + w.rng.Int64N(40000)
		}
		out = append(out, orders.Order{ID: fmt.Sprintf("O-%d", 101+i), Region: region,
			Customer: fmt.Sprintf("customer-%d", i+1), Paid: paid, Status: status})
	}
	return out
}

// openStore opens the world's bbolt file, whose writes fail while the
// store is down (faults.go).
func (w *world) openStore() error {
	db, err := store.Open(filepath.Join(w.dir, "state.db"), store.Options{NoSync: true, FailWrite: w.failWrite})
	if err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	w.db = db
	return nil
}

// start starts sc over the world's store, as a sidecar process starting
// does: a policy engine that records activations in the store and
// restores the bundle the store records as active, a release service, the
// dispatch clients and an engine, under leases in a fleet. It does not
// resume: restart does.
func (w *world) start(sc *sidecar) error {
	sc.starts++
	sc.holder = fmt.Sprintf("%s.%d", sc.name, sc.starts)
	sc.pol = policy.New(policy.Options{History: release.History{DB: w.db, Log: w.audit}, Clock: sc.clock, Timeout: 30 * time.Second,
		UnrestrictedBuiltins: !w.controls.RestrictedBuiltins, LimitOnlyLoosening: !w.controls.TwoPersonLoosening})
	sc.rel = release.New(w.db, sc.pol)
	if err := w.restoreBundle(sc); err != nil {
		return err
	}
	var err error
	if sc.sys, err = systems.New(systems.Options{LedgerURL: "http://ledger.sim", OrdersURL: "http://orders.sim",
		HTTPClient: &http.Client{Transport: from{w.net, sc}}, Minter: w.auth, Agent: agent, AttemptTimeout: time.Minute}); err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	c := w.controls
	o := engine.Options{Store: w.db, Policy: sc.pol, Systems: recorder{w: w, sc: sc}, Clock: sc.clock,
		Agent: agent, Controls: &c, Failpoint: func(p string) error { return w.failpoint(sc, p) }, Audit: w.audit}
	if w.fleet {
		// No sidecar renews its lease in a world: a call takes no
		// simulated time, and the paused one must not (fleet.go).
		o.Leases = &engine.Leases{Holder: sc.holder, TTL: engine.DefaultLeaseTTL, RenewEvery: noRenewal}
		o.Follow = sc.rel.Follow
	}
	sc.eng = engine.New(o)
	return nil
}

// restoreBundle gives sc's policy engine the bundle the store records as
// active, from the parsed bundles when it is one of the simulation's (no
// parse and compile per restart), else through the release service.
func (w *world) restoreBundle(sc *sidecar) error {
	var digest string
	if err := w.db.View(func(tx *store.Tx) error { digest = tx.ActiveDigest(); return nil }); err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	if b := w.shared.bundles.byDigest(digest); b != nil {
		if err := sc.pol.Restore(b); err != nil {
			return fmt.Errorf("sim: %w", err)
		}
		return nil
	}
	if err := sc.rel.Restore(context.Background()); err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	return nil
}

// failpoint crashes a sidecar at the armed point, once, and takes the
// store down from the point it was set to go down at.
func (w *world) failpoint(sc *sidecar, point string) error {
	if w.downAt == point {
		// What was written before this point is written first (a lease
		// let go, a done record queued): whether it fails must not depend
		// on which goroutine reaches the store first.
		w.quiesce()
		w.downAt = ""
		w.storeDown = true
		w.tracef("%s: the store fails every write from %s on", sc.name, point)
	}
	if w.armed != point {
		return nil
	}
	w.armed = ""
	w.crashed = sc
	w.tracef("%s: crash at %s", sc.name, point)
	return engine.ErrCrashed
}

// restart stops sc as a crash would (nothing more is done for the step
// in hand; what the store had been given is durable, see the package
// doc) and starts it again: one sidecar reopens its store; a fleet's
// member starts over the store the others keep using, as a new holder.
// Then it resumes every open workflow no live sidecar drives. A crash
// during that resume restarts again.
func (w *world) restart(ctx context.Context, sc *sidecar) error {
	for {
		w.restarts++
		sc.eng.Close()
		if !w.fleet {
			w.db.Close()
			if err := w.openStore(); err != nil {
				return err
			}
		}
		if err := w.start(sc); err != nil {
			return err
		}
		w.checkAcked("restart")
		err := sc.eng.ResumeAll(ctx)
		w.quiesce()
		w.tracef("restart %d (%s): resume all: %s", w.restarts, sc.holder, errClass(err))
		if !errors.Is(err, engine.ErrCrashed) {
			return nil
		}
	}
}

// close releases everything and removes the world's directory.
func (w *world) close() {
	for _, sc := range w.sidecars {
		if sc.paused != nil {
			sc.paused.abandon()
		}
		if sc.eng != nil {
			sc.eng.Close()
		}
	}
	if w.db != nil {
		w.db.Close()
	}
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

// recorder is a sidecar's Systems: the real client over the simulated
// network, watched where the engine sends an effect.
type recorder struct {
	w  *world
	sc *sidecar
}

var _ engine.Systems = recorder{}

func (r recorder) Order(ctx context.Context, as engine.Actor, order string) (policy.Order, error) {
	return r.sc.sys.Order(ctx, as, order)
}

func (r recorder) Shipments(ctx context.Context, order string) (int, error) {
	return r.sc.sys.Shipments(ctx, order)
}

func (r recorder) RefundByKey(ctx context.Context, key string) (json.RawMessage, bool, error) {
	return r.sc.sys.RefundByKey(ctx, key)
}

func (r recorder) ShipmentByReference(ctx context.Context, order, ref string) (json.RawMessage, bool, error) {
	return r.sc.sys.ShipmentByReference(ctx, order, ref)
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
	r.w.tracef("%s: execute %s %s %d", r.sc.name, c.Tool, c.Args.Order, c.Args.Amount)
	return r.sc.sys.Execute(ctx, as, c)
}

func (r recorder) Reverse(ctx context.Context, as engine.Actor, entry, key string) (json.RawMessage, error) {
	return r.sc.sys.Reverse(ctx, as, entry, key)
}

// skewed is a clock behind another by a fixed amount (ahead when
// negative).
type skewed struct {
	c      *simclock.Clock
	behind time.Duration
}

func (s skewed) Now() time.Time { return s.c.Now().Add(-s.behind) }
