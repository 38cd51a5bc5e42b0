package stack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/countersign/countersign/executor/audit"
	"github.com/countersign/countersign/executor/buildinfo"
	"github.com/countersign/countersign/executor/credential"
	"github.com/countersign/countersign/executor/decisionship"
	"github.com/countersign/countersign/executor/effectiveness"
	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/monitor"
	"github.com/countersign/countersign/executor/notify"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/reconcile"
	"github.com/countersign/countersign/executor/release"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/systems"
	"github.com/countersign/countersign/executor/telemetry"
	"github.com/countersign/countersign/sidecar"
	"github.com/countersign/countersign/sidecar/authn"
	"github.com/countersign/countersign/sidecar/leadpage"
	"github.com/countersign/countersign/sidecar/mcpfront"
	"github.com/countersign/countersign/sidecar/signin"
)

// Stack is a running sidecar and the pieces behind it.
type Stack struct {
	// URL is the sidecar's base URL, http://host:port.
	URL string

	Authority *credential.Authority
	Store     *store.DB
	Policy    *policy.Engine
	Releases  *release.Service
	Engine    *engine.Engine
	Server    *sidecar.Server
	Systems   *systems.Systems
	Audit     *audit.Log
	Reconcile *reconcile.Job
	Monitor   *monitor.Monitor

	res      *Reservation
	ln       net.Listener
	verifier *authn.Verifier
	// notifier posts approval notices (nil: no webhook).
	notifier *notify.Notifier
	shipper  *decisionship.Shipper
	// auditSigner signs the audit's checkpoints.
	auditSigner audit.Signer
	cancel      context.CancelFunc
	served      chan error
	// background are the sweep, reconciliation and monitors serve starts.
	background sync.WaitGroup
}

// Start validates o, reserves its data directory and address, and wires
// and serves the sidecar until Close.
func Start(ctx context.Context, o Options) (*Stack, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	r, err := ReserveStore(ctx, o.DataDir, o.StoreURL, o.Listen)
	if err != nil {
		return nil, err
	}
	return r.Start(ctx, o)
}

// Start wires and serves the sidecar over the reservation, which it owns
// from now on: o.DataDir and o.Listen are the reservation's. On any error
// everything is closed and the reservation released; only after
// engine.ErrCrashed (a crash test's failpoint during the start-up resume)
// is the closed stack returned too.
func (r *Reservation) Start(ctx context.Context, o Options) (*Stack, error) {
	o.DataDir, o.Listen = r.dir, r.ln.Addr().String()
	if err := o.Validate(); err != nil {
		r.Release()
		return nil, err
	}
	st := &Stack{URL: r.URL(), res: r, Store: r.store, ln: r.ln}
	err := st.start(ctx, o.withDefaults())
	if err == nil {
		return st, nil
	}
	st.Close()
	if errors.Is(err, engine.ErrCrashed) {
		return st, err
	}
	return nil, err
}

// start runs the steps in order; each fills in one piece of st.
func (st *Stack) start(ctx context.Context, o Options) (err error) {
	if st.Authority, err = st.openAuthority(o); err != nil {
		return err
	}
	if st.verifier, err = authn.New(ctx, authn.Options{Issuers: o.Issuers, Clock: o.Clock, Logger: o.Logger}); err != nil {
		return err
	}
	st.newPolicy(o)
	if st.auditSigner, err = st.openAuditSigner(o); err != nil {
		return err
	}
	if err := st.loadBundle(ctx, o); err != nil {
		return err
	}
	m, err := newMetrics()
	if err != nil {
		return err
	}
	if err := m.observer.KnownVersions(st.Store); err != nil {
		return err
	}
	if st.Systems, err = newSystems(o, st.Authority); err != nil {
		return err
	}
	if st.notifier, err = newNotifier(o, m.registry, st.URL); err != nil {
		return err
	}
	if st.shipper, err = newShipper(o, m.registry); err != nil {
		return err
	}
	st.Engine = st.newEngine(o, m.observer)
	if st.Reconcile, err = newReconcile(o, st.Store, st.Systems); err != nil {
		return err
	}
	if st.Monitor, err = st.newMonitor(o, m.registry); err != nil {
		return err
	}
	if err := m.registry.Register(telemetry.NewActiveBundle(st.Policy)); err != nil {
		return err
	}
	if err := m.registry.Register(effectiveness.NewCollector(st.Store, o.Clock, o.Logger)); err != nil {
		return err
	}
	if err := m.registry.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "countersign_workflow_waiters",
		Help: "Requests waiting for a workflow to change (GET /v1/workflows/{id}?wait=).",
	}, func() float64 { return float64(st.Engine.Waiting()) })); err != nil {
		return err
	}
	origins, err := mcpfront.ParseOrigins(o.MCPAllowedOrigins) // Validate has refused bad ones
	if err != nil {
		return err
	}
	signIn, err := st.openSignIn(ctx, o)
	if err != nil {
		return err
	}
	if st.Server, err = st.newServer(o, m, origins, signIn); err != nil {
		return err
	}
	st.serve(o, m)
	return st.resume(ctx, o)
}

// openAuthority keeps the signing keys in the store when the store is
// shared, so that every sidecar of the fleet mints with the same key, and
// in DataDir/keys otherwise.
func (st *Stack) openAuthority(o Options) (*credential.Authority, error) {
	co := credential.Options{Dir: o.DataDir, Clock: o.Clock, Logger: o.Logger, TTL: o.DispatchTokenTTL}
	switch {
	case st.Store.Shared():
		co.Store, co.KeyEncryptionKey = st.Store, o.KeyEncryptionKey
	case o.KeyEncryptionKey != nil:
		o.Logger.Warn("the key-encryption key is not used: on bbolt the signing keys stay in the data directory", "dir", o.DataDir)
	}
	return credential.Open(co)
}

// newPolicy makes the audit log, the policy engine (recording every
// activation attempt in the store's history and the audit log) and the
// release service over both.
func (st *Stack) newPolicy(o Options) {
	st.Audit = audit.New(audit.Options{Clock: o.Clock, Entropy: o.Entropy})
	st.Policy = policy.New(policy.Options{
		History: release.History{DB: st.Store, Log: st.Audit}, Clock: o.Clock, Timeout: o.PolicyTimeout,
		Verifier:             o.BundleVerifier,
		UnrestrictedBuiltins: o.Controls != nil && !o.Controls.RestrictedBuiltins,
		LimitOnlyLoosening:   o.Controls != nil && !o.Controls.TwoPersonLoosening,
	})
	st.Releases = release.New(st.Store, st.Policy)
}

// loadBundle activates o.Bundle, or restores the bundle the store records
// as active, or on a store that records none activates o.FirstBundle's.
// Without either a fresh sidecar stays not ready until an operator
// activates a bundle through the gate. An o.Bundle that is not a pure
// tightening of the bundle in force (the baseline release on a fresh
// store) is recorded as awaiting a second operator and the sidecar starts
// with the bundle it had, or none: starting it with a bundle is one
// person's act like an upload, and the second operator approves it over
// the API, which a refused start would leave nobody to call.
func (st *Stack) loadBundle(ctx context.Context, o Options) error {
	by := policy.Activation{By: o.ActivatedBy}
	if o.Bundle != nil {
		_, err := st.Releases.ActivateBundle(ctx, o.Bundle, by)
		var aw *policy.AwaitingError
		if errors.As(err, &aw) {
			o.Logger.Warn("the bundle to start with awaits a second operator; another operator approves it with POST /v1/bundles/{digest}/approve",
				"revision", aw.Revision, "digest", aw.Digest, "why", strings.Join(aw.Reasons, "; "))
			return nil
		}
		return err
	}
	err := st.Releases.Restore(ctx)
	if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	if o.FirstBundle == nil {
		return nil
	}
	b, err := o.FirstBundle()
	if err != nil {
		return err
	}
	_, err = st.Releases.ActivateBundle(ctx, b, by)
	return err
}

// metrics are the Prometheus registry the sidecar serves at /metrics and
// what reports into it.
type metrics struct {
	registry    *prometheus.Registry
	observer    *telemetry.Metrics
	unexplained prometheus.Gauge
	// unsequenced is the age of the oldest audit record a fleet has not
	// sequenced yet (audit.Sequencer).
	unsequenced prometheus.Gauge
}

func newMetrics() (metrics, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	obs, err := telemetry.New(reg)
	if err != nil {
		return metrics{}, err
	}
	unexplained := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "countersign_reconciliation_unexplained",
		Help: "Differences between the agent's records and the systems of record that the last reconciliation could not explain.",
	})
	if err := reg.Register(unexplained); err != nil {
		return metrics{}, err
	}
	unsequenced := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "countersign_audit_unsequenced_seconds",
		Help: "On a fleet, how long the oldest audit record has waited to be chained by the sequencer; alert above 10.",
	})
	if err := reg.Register(unsequenced); err != nil {
		return metrics{}, err
	}
	if err := reg.Register(buildInfoGauge(buildinfo.Read())); err != nil {
		return metrics{}, err
	}
	return metrics{registry: reg, observer: obs, unexplained: unexplained, unsequenced: unsequenced}, nil
}

// buildInfoGauge is countersign_build_info: always 1, so that a query can
// join the build's labels onto any other series of the same sidecar.
func buildInfoGauge(b buildinfo.Info) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "countersign_build_info",
		Help: "The running build; a label the build did not record reads unknown. Always 1.",
		ConstLabels: prometheus.Labels{
			"version": b.Version, "revision": b.Revision, "go_version": b.GoVersion, "opa_version": b.OPAVersion,
		},
	})
	g.Set(1)
	return g
}

// newSystems is the client of the ledger and the order system, minting a
// fresh actor token for o.Agent on every call.
func newSystems(o Options, minter *credential.Authority) (*systems.Systems, error) {
	return systems.New(systems.Options{
		LedgerURL: o.LedgerURL, OrdersURL: o.OrdersURL, Minter: minter, Agent: o.Agent, Logger: o.Logger,
		AttemptTimeout: o.AttemptTimeout,
	})
}

// SharedStorePoll is how often a reader waiting for a workflow to change
// (?wait=) reads it again on a store several sidecars share, where a
// change committed by another sidecar wakes nobody here.
const SharedStorePoll = 200 * time.Millisecond

// newEngine, on a store several sidecars share (StoreURL), follows the
// bundle any of them activates in each decision transaction, polls for
// the changes the others commit, and drives a workflow only under its
// lease.
func (st *Stack) newEngine(o Options, obs *telemetry.Metrics) *engine.Engine {
	opts := engine.Options{
		Store: st.Store, Policy: st.Policy, Systems: st.Systems, Clock: o.Clock, Logger: o.Logger,
		Agent: o.Agent, Controls: o.Controls, Failpoint: o.Failpoint, Observer: obs, Audit: st.Audit,
		TokenTTL: o.DispatchTokenTTL, ReceiverSkew: o.ReceiverClockSkew,
	}
	if st.shipper != nil {
		opts.Observer = shippingObserver{Metrics: obs, ship: st.shipper}
	}
	if st.notifier != nil {
		opts.Notifier = st.notifier
	}
	if o.StoreURL != "" {
		opts.Follow, opts.PollChanges = st.Releases.Follow, SharedStorePoll
		opts.Leases = &engine.Leases{Holder: engine.NewHolder(), TTL: o.LeaseTTL}
	}
	return engine.New(opts)
}

// NotifyDrain is how long a stopping sidecar goes on sending the approval
// notices still queued; what is left then is dropped (counted).
const NotifyDrain = 5 * time.Second

// newNotifier posts every approval transition to o.NotifyWebhook, linking
// to the lead's page under o.PublicURL (default self, the sidecar's own
// URL); nil without a webhook.
func newNotifier(o Options, reg prometheus.Registerer, self string) (*notify.Notifier, error) {
	if o.NotifyWebhook == "" {
		return nil, nil
	}
	public := o.PublicURL
	if public == "" {
		public = self
	}
	return notify.New(notify.Options{URL: o.NotifyWebhook, Secret: o.NotifyWebhookSecret, PublicURL: public,
		Clock: o.Clock, Logger: o.Logger, Registerer: reg})
}

// newReconcile compares the store's steps with the ledger's entries and
// the order system's shipments, and keeps the latest report in the store.
func newReconcile(o Options, db *store.DB, sys *systems.Systems) (*reconcile.Job, error) {
	return reconcile.New(reconcile.Options{
		Records: reconcile.FromStore(db), Ledger: sys.Dispatcher().Ledger(),
		Shipments: sys.Dispatcher().Orders(), Clock: o.Clock, Logger: o.Logger, Reports: db,
	})
}

// newMonitor's alerts go to the audit log, chained with everything else,
// in the transaction that marks them alerted.
func (st *Stack) newMonitor(o Options, reg prometheus.Registerer) (*monitor.Monitor, error) {
	return monitor.New(monitor.Options{
		Store: st.Store, Clock: o.Clock, Logger: o.Logger, Registerer: reg,
		Record: func(tx *store.Tx, a monitor.Alert) error {
			_, err := st.Audit.Append(tx, audit.Record{At: a.At, Kind: audit.KindAlert, Actor: audit.ActorMonitor,
				Detail: map[string]any{"kind": a.Kind, "message": a.Message, "violations": len(a.Steps)}})
			return err
		},
	})
}

// newServer, on a store several sidecars share, keeps the lead's page
// sessions in it, their tokens sealed with the fleet's key-encryption key
// (which openAuthority has made sure of), so that a lead signed in on one
// sidecar is signed in on every one; alone on bbolt, in memory, so that a
// restart signs everyone out.
func (st *Stack) newServer(o Options, m metrics, origins mcpfront.Origins, signIn leadpage.SignIn) (*sidecar.Server, error) {
	var sessions leadpage.Sessions
	if st.Store.Shared() {
		sessions = leadpage.NewStoreSessions(st.Store, o.KeyEncryptionKey, o.Clock)
	}
	return sidecar.New(sidecar.Options{
		SignIn: signIn, PasteTokens: o.PasteTokens,
		Engine: st.Engine, Policy: st.Policy, Releases: st.Releases, Credentials: st.Authority,
		Auth: st.verifier, Gatherer: m.registry, Registerer: m.registry, Logger: o.Logger, Store: st.Store, Audit: st.Audit,
		Reconcile: st.Reconcile, Unexplained: m.unexplained, Clock: o.Clock, DevLogins: o.DevLogins,
		PageSessions: sessions, MCPOrigins: origins,
		PublicURL: o.PublicURL, AuthorizationServers: authorizationServers(o.Issuers),
	})
}

// openSignIn reads the discovery document of o.SignIn's provider, so that
// one that cannot be reached or does not fit stops the start; nil without
// one.
func (st *Stack) openSignIn(ctx context.Context, o Options) (leadpage.SignIn, error) {
	if o.SignIn == nil {
		return nil, nil
	}
	so := *o.SignIn
	if so.RedirectURL == "" {
		so.RedirectURL = st.URL + signin.CallbackPath
	}
	so.Clock = o.Clock
	p, err := signin.New(ctx, so)
	if err != nil {
		return nil, fmt.Errorf("the lead page's sign-in: %w", err)
	}
	o.Logger.Info("the lead page signs in with OpenID Connect", "issuer", p.Issuer(), "redirect_url", p.RedirectURL())
	return p, nil
}

// serve starts the sidecar on the reserved socket and, with o.Background,
// the periodic reconciliation and monitors; Close stops them all.
func (st *Stack) serve(o Options, m metrics) {
	sctx, cancel := context.WithCancel(context.Background())
	st.cancel, st.served = cancel, make(chan error, 1)
	go func() { st.served <- st.Server.Serve(sctx, st.ln) }()
	if o.StoreURL != "" {
		st.background.Go(func() { st.Engine.SweepEvery(sctx, sweepEvery(o.LeaseTTL)) })
		seq := audit.Sequencer{Log: st.Audit, DB: st.Store, Holder: st.Engine.Holder(), Logger: o.Logger, Waiting: m.unsequenced}
		st.background.Go(func() { seq.Run(sctx) })
	}
	cp := audit.Checkpointer{Log: st.Audit, DB: st.Store, Signer: st.auditSigner, Rule: o.AuditCheckpoint,
		Holder: st.Engine.Holder(), URL: o.AuditCheckpointURL, Logger: o.Logger.With("component", "audit-checkpoints")}
	st.background.Go(func() { cp.Run(sctx) })
	if !o.Background {
		return
	}
	st.background.Go(func() {
		st.Reconcile.RunEvery(sctx, ReconcileEvery, func(r reconcile.Report, err error) {
			if err == nil {
				m.unexplained.Set(float64(r.Unexplained))
			}
		})
	})
	st.background.Go(func() { st.Monitor.Run(sctx, MonitorEvery) })
}

// sweepEvery is how often a sidecar on a shared store looks for expired
// leases: twice per TTL, so a dead sidecar's workflows wait at most about
// one and a half TTLs.
func sweepEvery(ttl time.Duration) time.Duration {
	if ttl <= 0 {
		ttl = engine.DefaultLeaseTTL
	}
	return ttl / 2
}

// resume finishes what a crash may have left between decision and record.
// Only a crash test's failpoint ends the start; anything else the next
// resume or a person resolves. On a shared store it leaves the workflows
// that live sidecars drive to them (engine.ResumeAll).
func (st *Stack) resume(ctx context.Context, o Options) error {
	err := st.Engine.ResumeAll(ctx)
	if err == nil || errors.Is(err, engine.ErrCrashed) {
		return err
	}
	o.Logger.Warn("resume at start incomplete", "err", err)
	return nil
}

// Close shuts the sidecar down gracefully, then releases the data
// directory and the address. It is safe on a stack that failed half-way
// through Start, on nil, and twice.
func (st *Stack) Close() error {
	if st == nil {
		return nil
	}
	var errs []error
	if st.cancel != nil {
		st.cancel()
		if err := <-st.served; err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
		st.cancel = nil
	}
	st.background.Wait()
	if st.Engine != nil {
		st.Engine.Close() // its leases go before the store does
	}
	if st.notifier != nil { // after the engine: it queues no more
		ctx, cancel := context.WithTimeout(context.Background(), NotifyDrain)
		_ = st.notifier.Close(ctx) // what it could not send it counted and logged
		cancel()
		st.notifier = nil
	}
	if st.shipper != nil { // after the engine too
		ctx, cancel := context.WithTimeout(context.Background(), DecisionLogDrain)
		_ = st.shipper.Close(ctx) // what it could not ship it counted and logged
		cancel()
		st.shipper = nil
	}
	if st.verifier != nil {
		st.verifier.Close(context.Background())
		st.verifier = nil
	}
	errs = append(errs, st.res.Release())
	return errors.Join(errs...)
}
