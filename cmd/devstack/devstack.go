// Package devstack brings up the whole of countersign on loopback from a
// data directory: the ledger and the order system (each with its own bbolt
// file), the dev identity provider, the actor-token authority, the store,
// the policy engine with its bundle, the step engine and the sidecar. It is
// what `serve --dev`, the demo and the end-to-end tests run, so they all run
// the real pieces over real sockets.
//
// State lives under the data directory, so a stack started again over the
// same directory finds the ledger, the order system, the keys and every
// workflow as they were.
//
// With Options.External the same wiring runs a production sidecar: it
// talks to the systems of record and identity providers it is given and
// starts no simulator.
package devstack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/countersign/countersign/bundles"
	"github.com/countersign/countersign/executor/audit"
	"github.com/countersign/countersign/executor/credential"
	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/fixture"
	"github.com/countersign/countersign/executor/monitor"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/reconcile"
	"github.com/countersign/countersign/executor/release"
	"github.com/countersign/countersign/executor/sim/idp"
	"github.com/countersign/countersign/executor/sim/ledger"
	"github.com/countersign/countersign/executor/sim/orders"
	"github.com/countersign/countersign/executor/sim/simserver"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/systems"
	"github.com/countersign/countersign/executor/telemetry"
	"github.com/countersign/countersign/sidecar"
	"github.com/countersign/countersign/sidecar/authn"
)

// Options configure a stack. DataDir is required.
type Options struct {
	DataDir string
	// Listen is the sidecar's address. Default 127.0.0.1:0.
	Listen string
	// Bundle, when set, is activated through the gate at start. Otherwise
	// the bundle the store records as active is restored, or the embedded
	// p1 is activated on a fresh directory.
	Bundle *policy.Bundle
	// Clock defaults to the wall clock.
	Clock engine.Clock
	// Controls default to engine.DefaultControls (tests remove one).
	Controls *engine.Controls
	// Failpoint is passed to the engine (crash tests).
	Failpoint func(string) error
	Logger    *slog.Logger
	// Entropy seeds audit ids (the drill, for byte-identical runs).
	Entropy io.Reader
	// External, when set, runs the sidecar against real systems of record
	// and identity providers: no simulator, no dev IdP, no default bundle.
	External *External
	// Background starts the periodic reconciliation (every 5 minutes) and
	// the monitors (every minute), as serve does.
	Background bool
	// PolicyTimeout bounds each policy evaluation (policy.Options.Timeout).
	// Default policy.DefaultTimeout.
	PolicyTimeout time.Duration
	// AttemptTimeout bounds each call to a system of record
	// (dispatch.Options.AttemptTimeout). Default dispatch.DefaultAttemptTimeout.
	AttemptTimeout time.Duration
}

// External names the systems a production sidecar talks to.
type External struct {
	LedgerURL string
	OrdersURL string
	// Issuers are the trusted identity providers of people's tokens.
	Issuers []authn.Issuer
}

// Endpoints are the base URLs dev mode writes to dev-endpoints.json.
type Endpoints struct {
	Sidecar    string `json:"sidecar"`
	Ledger     string `json:"ledger"`
	Orders     string `json:"orders"`
	IssuerJWKS string `json:"issuer_jwks"`
}

// Stack is a running system.
type Stack struct {
	Endpoints Endpoints
	// Tokens are bearer tokens for every fixture person, valid 24 h.
	Tokens map[string]string

	Ledger    *ledger.Server
	Orders    *orders.Server
	IdP       *idp.Issuer
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

	verifier *authn.Verifier
	cancel   context.CancelFunc
	served   chan error
	closers  []func() error
}

// The dev layout under the data directory: the sidecar's bbolt file and
// the simulators' own directories.
const (
	StoreFile = "sidecar.db"
	LedgerDir = "ledger"
	OrdersDir = "orders"
)

// FixtureOrders are the Quillfeather orders in the order system's own type.
func FixtureOrders() []orders.Order {
	var out []orders.Order
	for _, o := range fixture.Orders() {
		out = append(out, orders.Order{ID: o.ID, Region: o.Region, Customer: o.Customer, Paid: int64(o.Paid), Status: o.Status})
	}
	return out
}

// AgentID is the act.sub of every actor token the stack mints.
const AgentID = "quillfeather-support-agent"

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now().UTC() }

// Start brings the stack up and serves until Close. A data directory or
// address a person must change is a *StartError. On any error what was
// started is closed again; only after engine.ErrCrashed (a crash test's
// failpoint during the start-up resume) is the closed stack returned too.
func Start(ctx context.Context, o Options) (*Stack, error) {
	if o.DataDir == "" {
		return nil, errors.New("devstack: DataDir is required")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = wallClock{}
	}
	if o.Listen == "" {
		o.Listen = "127.0.0.1:0"
	}
	st := &Stack{}
	err := st.start(ctx, o)
	if err == nil {
		return st, nil
	}
	st.Close()
	if errors.Is(err, engine.ErrCrashed) {
		return st, err
	}
	return nil, err
}

// start fills st in, appending a closer for everything it starts, so that
// Close undoes exactly what a failed start got through.
func (st *Stack) start(ctx context.Context, o Options) (err error) {
	// The store first: it is what tells a data directory held by another
	// process or not writable, before anything listens.
	if st.Store, err = store.Open(filepath.Join(o.DataDir, StoreFile), store.Options{}); err != nil {
		return storeError(o.DataDir, err)
	}
	st.closers = append(st.closers, st.Store.Close)
	if err := recordPID(o.DataDir); err != nil {
		return storeError(o.DataDir, fmt.Errorf("%w: %w", store.ErrUnwritable, err))
	}
	st.closers = append(st.closers, func() error { return os.Remove(filepath.Join(o.DataDir, PIDFile)) })
	now := o.Clock.Now
	serve := func(name string, h http.Handler) (string, error) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", fmt.Errorf("devstack: listen for %s: %w", name, err)
		}
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
		go srv.Serve(ln)
		st.closers = append(st.closers, func() error { return srv.Close() })
		return "http://" + ln.Addr().String(), nil
	}

	sidecarLn, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return listenError(o.Listen, err)
	}
	st.closers = append(st.closers, func() error { sidecarLn.Close(); return nil })
	st.Endpoints.Sidecar = "http://" + sidecarLn.Addr().String()
	jwksURL := st.Endpoints.Sidecar + "/.well-known/jwks.json"

	if st.Authority, err = credential.Open(credential.Options{Dir: o.DataDir, Clock: now, Logger: o.Logger}); err != nil {
		return err
	}
	if o.External != nil {
		st.Endpoints.Ledger, st.Endpoints.Orders = o.External.LedgerURL, o.External.OrdersURL
		if st.verifier, err = authn.New(ctx, authn.Options{Issuers: o.External.Issuers, Clock: now, Logger: o.Logger}); err != nil {
			return err
		}
	} else if err := st.startSimulators(ctx, o, jwksURL, serve); err != nil {
		return err
	}

	st.Audit = audit.New(audit.Options{Clock: o.Clock, Entropy: o.Entropy})
	st.Policy = policy.New(policy.Options{History: release.History{DB: st.Store, Log: st.Audit}, Clock: now, Timeout: o.PolicyTimeout,
		UnrestrictedBuiltins: o.Controls != nil && !o.Controls.RestrictedBuiltins})
	st.Releases = release.New(st.Store, st.Policy)
	if err := st.loadBundle(ctx, o.Bundle, o.External == nil); err != nil {
		return err
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics, err := telemetry.New(reg)
	if err != nil {
		return err
	}
	st.Systems, err = systems.New(systems.Options{
		LedgerURL: st.Endpoints.Ledger, OrdersURL: st.Endpoints.Orders, Minter: st.Authority, Agent: AgentID, Logger: o.Logger,
		AttemptTimeout: o.AttemptTimeout,
	})
	if err != nil {
		return err
	}
	st.Engine = engine.New(engine.Options{
		Store: st.Store, Policy: st.Policy, Systems: st.Systems, Clock: o.Clock, Logger: o.Logger,
		Agent: AgentID, Controls: o.Controls, Failpoint: o.Failpoint, Observer: metrics, Audit: st.Audit,
	})
	if st.Reconcile, err = reconcile.New(reconcile.Options{
		Records: reconcile.FromStore(st.Store), Ledger: st.Systems.Dispatcher().Ledger(),
		Shipments: st.Systems.Dispatcher().Orders(), Clock: o.Clock, Logger: o.Logger,
	}); err != nil {
		return err
	}
	if st.Monitor, err = monitor.New(monitor.Options{
		Store: st.Store, Clock: now, Logger: o.Logger, Registerer: reg,
		Sink: func(a monitor.Alert) error {
			return st.Engine.RecordEvent(ctx, audit.Record{At: a.At, Kind: audit.KindAlert, Actor: audit.ActorMonitor,
				Detail: map[string]any{"kind": a.Kind, "message": a.Message, "violations": len(a.Steps)}})
		},
	}); err != nil {
		return err
	}
	unexplained := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "countersign_reconciliation_unexplained",
		Help: "Differences between the agent's records and the systems of record that the last reconciliation could not explain.",
	})
	reg.MustRegister(unexplained)
	st.Server = sidecar.New(sidecar.Options{
		Engine: st.Engine, Policy: st.Policy, Releases: st.Releases, Credentials: st.Authority,
		Auth: st.verifier, Gatherer: reg, Logger: o.Logger, Store: st.Store, Audit: st.Audit,
		Reconcile: st.Reconcile, Unexplained: unexplained,
	})
	sctx, cancel := context.WithCancel(context.Background())
	st.cancel, st.served = cancel, make(chan error, 1)
	go func() { st.served <- st.Server.Serve(sctx, sidecarLn) }()
	if o.Background {
		go st.Reconcile.RunEvery(sctx, 5*time.Minute, func(r reconcile.Report, err error) {
			if err == nil {
				unexplained.Set(float64(r.Unexplained))
			}
		})
		go st.Monitor.Run(sctx, time.Minute)
	}

	// Finish what a crash may have left between decision and record.
	if err := st.Engine.ResumeAll(ctx); err != nil {
		if errors.Is(err, engine.ErrCrashed) {
			return err
		}
		o.Logger.Warn("resume at start incomplete", "err", err)
	}
	return nil
}

// startSimulators starts the ledger, the order system (seeded with the
// Quillfeather orders) and the dev identity provider, each on its own
// loopback port with its state under the data directory.
func (st *Stack) startSimulators(ctx context.Context, o Options, jwksURL string, serve func(string, http.Handler) (string, error)) (err error) {
	now := o.Clock.Now
	// The receivers fetch the JWKS on every request (max age 0), so a
	// raised epoch refuses old tokens at once. The single-use check of
	// actor tokens is theirs; only a test removing it turns it off.
	sim := func(dir string) simserver.Options {
		return simserver.Options{DataDir: filepath.Join(o.DataDir, dir), JWKSURL: jwksURL, Clock: now, Logger: o.Logger,
			AllowTokenReplay: o.Controls != nil && !o.Controls.SingleUseTokens}
	}
	if st.Ledger, err = ledger.Open(sim(LedgerDir)); err != nil {
		return err
	}
	st.closers = append(st.closers, st.Ledger.Close)
	if st.Orders, err = orders.Open(orders.Options{Options: sim(OrdersDir), Orders: FixtureOrders()}); err != nil {
		return err
	}
	st.closers = append(st.closers, st.Orders.Close)
	if st.Endpoints.Ledger, err = serve("ledger", st.Ledger); err != nil {
		return err
	}
	if st.Endpoints.Orders, err = serve("orders", st.Orders); err != nil {
		return err
	}

	if st.IdP, err = idp.Open(idp.Options{Dir: o.DataDir, Clock: now}); err != nil {
		return err
	}
	if st.Endpoints.IssuerJWKS, err = serve("issuer", st.IdP.JWKSHandler()); err != nil {
		return err
	}
	st.Endpoints.IssuerJWKS += "/.well-known/jwks.json"
	if st.Tokens, err = st.IdP.Tokens(fixture.People(), idp.DevTokenTTL); err != nil {
		return err
	}
	if st.verifier, err = authn.New(ctx, authn.Options{Issuers: []authn.Issuer{{Name: st.IdP.Name(), Keys: st.IdP.JWKS()}}, Clock: now}); err != nil {
		return err
	}
	return nil
}

// loadBundle activates the requested bundle, restores the recorded one, or
// activates the embedded p1 on a fresh directory.
func (st *Stack) loadBundle(ctx context.Context, b *policy.Bundle, dev bool) error {
	by := policy.Activation{By: "dev-mode"}
	if b != nil {
		_, err := st.Releases.ActivateBundle(ctx, b, by)
		return err
	}
	err := st.Releases.Restore(ctx)
	if !errors.Is(err, store.ErrNotFound) || !dev {
		// Outside dev mode a fresh sidecar stays not ready until an
		// operator activates a bundle through the gate.
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		return err
	}
	fsys, err := bundles.Open("p1")
	if err != nil {
		return err
	}
	p1, err := policy.LoadFS(fsys)
	if err != nil {
		return err
	}
	_, err = st.Releases.ActivateBundle(ctx, p1, by)
	return err
}

// WriteFiles writes dev-endpoints.json and dev-tokens.json (0600) into dir.
func (st *Stack) WriteFiles(dir string) error {
	for name, v := range map[string]any{"dev-endpoints.json": st.Endpoints, "dev-tokens.json": st.Tokens} {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, name), append(b, '\n'), 0o600); err != nil {
			return fmt.Errorf("devstack: write %s: %w", name, err)
		}
	}
	return nil
}

// Close shuts the sidecar down gracefully, then everything else. It is safe
// on a stack that failed half-way through Start, on nil, and twice.
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
	if st.verifier != nil {
		st.verifier.Close(context.Background())
	}
	for i := len(st.closers) - 1; i >= 0; i-- {
		if err := st.closers[i](); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	st.closers = nil
	return errors.Join(errs...)
}
