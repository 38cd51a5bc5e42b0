// Package devstack brings up the whole of countersign on loopback from a
// data directory: it starts the simulated ledger and order system (each
// with its own bbolt file, the order system seeded with the Quillfeather
// orders) and the dev identity provider, and then the production wiring of
// cmd/stack against them. It is what `serve --dev`, the demo, the drill
// and the end-to-end tests run, so they all run the real pieces over real
// sockets and the same wiring as production.
//
// State lives under the data directory, so a stack started again over the
// same directory finds the ledger, the order system, the keys and every
// workflow as they were.
package devstack

import (
	"context"
	"crypto/rand"
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

	"github.com/countersign/countersign/bundles"
	"github.com/countersign/countersign/cmd/stack"
	"github.com/countersign/countersign/executor/audit"
	"github.com/countersign/countersign/executor/clock"
	"github.com/countersign/countersign/executor/credential"
	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/fixture"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/sim/actorcheck"
	"github.com/countersign/countersign/executor/sim/idp"
	"github.com/countersign/countersign/executor/sim/ledger"
	"github.com/countersign/countersign/executor/sim/orders"
	"github.com/countersign/countersign/executor/sim/simserver"
	"github.com/countersign/countersign/sidecar/authn"
	"github.com/countersign/countersign/sidecar/signin"
)

// Options configure a dev stack. DataDir is required.
type Options struct {
	DataDir string
	// StoreURL, when set, puts the sidecar's store in that PostgreSQL
	// database (stack.Options.StoreURL); the simulators, the identity
	// provider and the keys stay under DataDir.
	StoreURL string
	// LeaseTTL: see stack.Options.
	LeaseTTL time.Duration
	// KeyEncryptionKey seals the fleet's signing keys in the shared store
	// (StoreURL): see stack.Options.
	KeyEncryptionKey *credential.KeyEncryptionKey
	// Listen is the sidecar's address. Default stack.DefaultListen.
	Listen string
	// Agent is the act.sub of every actor token. Default AgentID.
	Agent string
	// Bundle, when set, is activated through the gate at start. Otherwise
	// the bundle the store records as active is restored, or the embedded
	// p1 is activated on a fresh directory.
	Bundle *policy.Bundle
	// Clock is everyone's clock; nil, the wall clock (each part defaults it).
	Clock clock.Clock
	// Controls default to engine.DefaultControls (tests remove one).
	Controls *engine.Controls
	// Failpoint is passed to the engine (crash tests).
	Failpoint func(string) error
	Logger    *slog.Logger
	// Entropy seeds audit ids (the drill, for byte-identical runs).
	Entropy io.Reader
	// Background starts the periodic reconciliation and the monitors, as
	// serve does.
	Background bool
	// PolicyTimeout bounds each policy evaluation. serve --dev passes its
	// --policy-timeout (default policy.DefaultTimeout, 100 ms). Left zero,
	// as the demo, the drill and the tests leave it, it is
	// InProcessPolicyTimeout: their outcomes must not depend on how loaded
	// the machine is, and a test of the deadline sets its own.
	PolicyTimeout time.Duration
	// AttemptTimeout: see stack.Options.
	AttemptTimeout time.Duration
	// MCPAllowedOrigins: see stack.Options. Default none, as in production.
	MCPAllowedOrigins []string
	// PublicURL: see stack.Options. Default: each request's own.
	PublicURL string
	// DispatchTokenTTL and ReceiverClockSkew: see stack.Options.
	DispatchTokenTTL  time.Duration
	ReceiverClockSkew time.Duration
	// NotifyWebhook and NotifyWebhookSecret: see stack.Options.
	NotifyWebhook       string
	NotifyWebhookSecret []byte
	// DecisionLogURL: see stack.Options.
	DecisionLogURL string
	// AuditKeyFile, AuditCheckpoint and AuditCheckpointURL: see
	// stack.Options. Default: the key in DataDir, made on the first start.
	AuditKeyFile       string
	AuditCheckpoint    audit.CheckpointRule
	AuditCheckpointURL string
}

// InProcessPolicyTimeout is the evaluation deadline of a dev stack whose
// Options leave PolicyTimeout zero. A decision takes well under a
// millisecond; on a starved machine (two cores under the race detector) a
// 100 ms deadline was missed and a drill seed failed.
const InProcessPolicyTimeout = 2 * time.Second

// Endpoints are the base URLs dev mode writes to dev-endpoints.json.
type Endpoints struct {
	Sidecar    string `json:"sidecar"`
	Ledger     string `json:"ledger"`
	Orders     string `json:"orders"`
	IssuerJWKS string `json:"issuer_jwks"`
	// OIDCIssuer is the dev identity provider as an OpenID Connect
	// provider: the lead's page signs in there.
	OIDCIssuer string `json:"oidc_issuer"`
}

// Stack is a running system: the production stack and the simulators it
// talks to.
type Stack struct {
	*stack.Stack
	Endpoints Endpoints
	// Tokens are bearer tokens for every fixture person, valid 24 h.
	Tokens map[string]string
	Ledger *ledger.Server
	Orders *orders.Server
	IdP    *idp.Issuer
	// OIDC is the identity provider's OpenID Connect face, where the
	// lead's page signs in (tests set its faults).
	OIDC *idp.Provider

	issuers []authn.Issuer
	signIn  *signin.Options
	closers []func() error
}

// DevClientID is the lead page's client id at the dev identity provider;
// its secret is drawn afresh at every start.
const DevClientID = "countersign-lead-page"

// The simulators' directories under the data directory, beside the
// sidecar's stack.StoreFile.
const (
	LedgerDir = "ledger"
	OrdersDir = "orders"
)

// FixtureOrders are the Quillfeather orders in the order system's own
// type, dated from seeded, the moment the order system is seeded.
func FixtureOrders(seeded time.Time) []orders.Order {
	var out []orders.Order
	for _, o := range fixture.Orders() {
		ord := orders.Order{ID: o.ID, Region: o.Region, Customer: o.Customer, Paid: int64(o.Paid), Status: o.Status,
			PlacedAt: o.PlacedAt(seeded).UTC(), ShippedAt: o.ShippedAt(seeded).UTC()}
		for _, l := range o.Lines {
			ord.Lines = append(ord.Lines, orders.Line{ID: l.ID, SKU: l.SKU, Description: l.Description,
				UnitAmount: int64(l.UnitAmount), Quantity: l.Quantity, RefundedQuantity: l.RefundedQuantity})
		}
		out = append(out, ord)
	}
	return out
}

// AgentID is the dev stack's agent: the act.sub of every actor token it
// mints unless Options.Agent names another.
const AgentID = "quillfeather-support-agent"

// Start reserves the data directory and the sidecar's address, starts the
// simulators, and then the production stack against them. A data
// directory or address a person must change is a *stack.StartError. On
// any error what was started is closed again; only after engine.ErrCrashed
// (a crash test's failpoint during the start-up resume) is the closed
// stack returned too.
func Start(ctx context.Context, o Options) (*Stack, error) {
	if o.DataDir == "" {
		return nil, errors.New("devstack: DataDir is required")
	}
	res, err := stack.ReserveStore(ctx, o.DataDir, o.StoreURL, o.Listen)
	if err != nil {
		return nil, err
	}
	st := &Stack{Endpoints: Endpoints{Sidecar: res.URL()}}
	if err := st.startSimulators(o, res.JWKSURL()); err != nil {
		res.Release()
		st.Close()
		return nil, err
	}
	st.Stack, err = res.Start(ctx, st.productionOptions(o))
	if err == nil {
		return st, nil
	}
	st.Close()
	if errors.Is(err, engine.ErrCrashed) {
		return st, err
	}
	return nil, err
}

// productionOptions are o for cmd/stack, pointed at the simulators.
func (st *Stack) productionOptions(o Options) stack.Options {
	agent := o.Agent
	if agent == "" {
		agent = AgentID
	}
	timeout := o.PolicyTimeout
	if timeout == 0 {
		timeout = InProcessPolicyTimeout
	}
	return stack.Options{
		DataDir: o.DataDir, StoreURL: o.StoreURL, LeaseTTL: o.LeaseTTL, KeyEncryptionKey: o.KeyEncryptionKey, Agent: agent,
		LedgerURL: st.Endpoints.Ledger, OrdersURL: st.Endpoints.Orders, Issuers: st.issuers,
		Bundle: o.Bundle, FirstBundle: embeddedP1, ActivatedBy: "dev-mode",
		Clock: o.Clock, Controls: o.Controls, Failpoint: o.Failpoint, Logger: o.Logger, Entropy: o.Entropy,
		Background: o.Background, PolicyTimeout: timeout, AttemptTimeout: o.AttemptTimeout,
		DevLogins: st.leadTokens(), PasteTokens: true, SignIn: st.signIn, MCPAllowedOrigins: o.MCPAllowedOrigins, PublicURL: o.PublicURL,
		DispatchTokenTTL: o.DispatchTokenTTL, ReceiverClockSkew: o.ReceiverClockSkew,
		NotifyWebhook: o.NotifyWebhook, NotifyWebhookSecret: o.NotifyWebhookSecret,
		DecisionLogURL: o.DecisionLogURL,
		AuditKeyFile:   o.AuditKeyFile, AuditCheckpoint: o.AuditCheckpoint, AuditCheckpointURL: o.AuditCheckpointURL,
	}
}

// leadTokens are the fixture leads' tokens, the dev sign-ins of the lead's
// page.
func (st *Stack) leadTokens() map[string]string {
	out := map[string]string{}
	for _, p := range fixture.People() {
		if p.Role == fixture.RoleLead {
			out[p.ID] = st.Tokens[p.ID]
		}
	}
	return out
}

// embeddedP1 is the bundle a fresh dev data directory starts with.
func embeddedP1() (*policy.Bundle, error) {
	fsys, err := bundles.Open("p1")
	if err != nil {
		return nil, err
	}
	return policy.LoadFS(fsys)
}

// startSimulators starts the ledger, the order system (seeded with the
// Quillfeather orders) and the dev identity provider, each on its own
// loopback port with its state under the data directory, and mints a token
// for every fixture person.
func (st *Stack) startSimulators(o Options, jwksURL string) (err error) {
	// The receivers keep the JWKS for actorcheck.DefaultMaxAge (1 s) and
	// fetch it at once for a kid newer than their copy, so a raised epoch
	// refuses the tokens minted before it within 1 s (TestRaisedEpochBites)
	// without a JWKS fetch on every request. The single-use check of actor
	// tokens is theirs, and so is the order system's reference key; only a
	// test removing one turns it off.
	sim := func(dir string) simserver.Options {
		return simserver.Options{DataDir: filepath.Join(o.DataDir, dir), JWKSURL: jwksURL, JWKSMaxAge: actorcheck.DefaultMaxAge,
			Clock: o.Clock, Logger: o.Logger, AllowTokenReplay: o.Controls != nil && !o.Controls.SingleUseTokens}
	}
	// The order system first: the ledger books line-item refunds there.
	noRefKey := o.Controls != nil && !o.Controls.ReferenceKeys
	seeded := clock.Clock(clock.Wall{})
	if o.Clock != nil {
		seeded = o.Clock
	}
	if st.Orders, err = orders.Open(orders.Options{Options: sim(OrdersDir), Orders: FixtureOrders(seeded.Now()), NoReferenceKey: noRefKey}); err != nil {
		return err
	}
	st.closers = append(st.closers, st.Orders.Close)
	if st.Endpoints.Orders, err = st.serve("orders", st.Orders); err != nil {
		return err
	}
	if st.Ledger, err = ledger.Open(ledger.Options{Options: sim(LedgerDir), OrdersURL: st.Endpoints.Orders}); err != nil {
		return err
	}
	st.closers = append(st.closers, st.Ledger.Close)
	if st.Endpoints.Ledger, err = st.serve("ledger", st.Ledger); err != nil {
		return err
	}
	return st.startIdP(o)
}

// startIdP starts the dev identity provider, whose keys the sidecar trusts
// and where the lead's page signs in (OpenID Connect, the sidecar its one
// client).
func (st *Stack) startIdP(o Options) (err error) {
	if st.IdP, err = idp.Open(idp.Options{Dir: o.DataDir, Clock: o.Clock}); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("devstack: listen for the identity provider: %w", err)
	}
	base := "http://" + ln.Addr().String()
	page := signin.Options{Issuer: base, ClientID: DevClientID, ClientSecret: rand.Text(),
		RedirectURL: st.Endpoints.Sidecar + signin.CallbackPath}
	st.OIDC, err = st.IdP.Provider(idp.ProviderOptions{URL: base, People: fixture.People(),
		Clients: []idp.Client{{ID: page.ClientID, Secret: page.ClientSecret, RedirectURIs: []string{page.RedirectURL}}}})
	if err != nil {
		ln.Close()
		return err
	}
	st.serveOn(ln, st.OIDC)
	st.signIn = &page
	st.Endpoints.IssuerJWKS, st.Endpoints.OIDCIssuer = base+"/.well-known/jwks.json", base
	if st.Tokens, err = st.IdP.Tokens(fixture.People(), idp.DevTokenTTL); err != nil {
		return err
	}
	st.issuers = []authn.Issuer{{Name: st.IdP.Name(), Keys: st.IdP.JWKS()}}
	return nil
}

// serve serves h on a fresh loopback port until Close.
func (st *Stack) serve(name string, h http.Handler) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("devstack: listen for %s: %w", name, err)
	}
	st.serveOn(ln, h)
	return "http://" + ln.Addr().String(), nil
}

// serveOn serves h on ln until Close.
func (st *Stack) serveOn(ln net.Listener, h http.Handler) {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	st.closers = append(st.closers, func() error { return srv.Close() })
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

// Close shuts the sidecar down gracefully, then the simulators. It is safe
// on a stack that failed half-way through Start, on nil, and twice.
func (st *Stack) Close() error {
	if st == nil {
		return nil
	}
	errs := []error{st.Stack.Close()}
	for i := len(st.closers) - 1; i >= 0; i-- {
		if err := st.closers[i](); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	st.closers = nil
	return errors.Join(errs...)
}
