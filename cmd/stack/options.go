package stack

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"time"

	"github.com/countersign/countersign/executor/audit"
	"github.com/countersign/countersign/executor/clock"
	"github.com/countersign/countersign/executor/credential"
	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/sidecar/authn"
	"github.com/countersign/countersign/sidecar/mcpfront"
	"github.com/countersign/countersign/sidecar/signin"
)

// Defaults of Options.
const (
	// DefaultListen is the sidecar's address: loopback, a free port.
	DefaultListen = "127.0.0.1:0"
	// DefaultActivatedBy is who the bundle history records for a bundle
	// activated at start.
	DefaultActivatedBy = "serve"
	// ReconcileEvery and MonitorEvery are the periods of the background
	// jobs (Options.Background).
	ReconcileEvery = 5 * time.Minute
	MonitorEvery   = time.Minute
)

// Options configure a production sidecar. DataDir, Agent, LedgerURL,
// OrdersURL and Issuers are required; everything else has a default.
type Options struct {
	// DataDir holds the store (StoreFile) unless StoreURL is set, the
	// signing keys and PIDFile.
	DataDir string
	// StoreURL, when set, is the PostgreSQL database (a postgres:// URL)
	// that holds the store, shared by every sidecar of a fleet; its schema
	// is created or migrated at start. Empty: bbolt under DataDir.
	StoreURL string
	// LeaseTTL is how long a sidecar on StoreURL holds a workflow it
	// drives without renewing (engine.Leases): a killed sidecar's
	// workflows are taken over by the others after it. Default
	// engine.DefaultLeaseTTL.
	LeaseTTL time.Duration
	// Listen is the sidecar's address. Default DefaultListen.
	Listen string
	// Agent is the agent this sidecar speaks for: the act.sub of every
	// actor token it mints.
	Agent string
	// LedgerURL and OrdersURL are the http(s) base URLs of the systems of
	// record. They verify actor tokens against this sidecar's JWKS.
	LedgerURL string
	OrdersURL string
	// Issuers are the trusted identity providers of people's tokens.
	Issuers []authn.Issuer
	// Bundle, when set, is activated through the gate at start. Otherwise
	// the bundle the store records as active is restored.
	Bundle *policy.Bundle
	// FirstBundle, when set, gives the bundle to activate on a store that
	// records none (the dev stack's embedded p1). Unset, a fresh sidecar
	// stays not ready (503) until an operator activates one through the
	// gate.
	FirstBundle func() (*policy.Bundle, error)
	// BundleVerifier, when set, requires every bundle to carry an OPA
	// signature (.signatures.json) that it verifies: Bundle, FirstBundle,
	// the bundle the store restores and every upload. Nil requires none.
	BundleVerifier *policy.Verifier
	// ActivatedBy is who the bundle history records for Bundle or
	// FirstBundle. Default DefaultActivatedBy.
	ActivatedBy string
	// Clock defaults to the wall clock (UTC).
	Clock clock.Clock
	// Controls default to engine.DefaultControls; only tests remove one.
	Controls *engine.Controls
	// Failpoint is passed to the engine (crash tests only).
	Failpoint func(string) error
	// Logger defaults to discarding.
	Logger *slog.Logger
	// Entropy seeds audit ids (the drill, for byte-identical runs).
	// Default crypto/rand.
	Entropy io.Reader
	// Background starts the periodic reconciliation (ReconcileEvery) and
	// the monitors (MonitorEvery), as serve does.
	Background bool
	// PolicyTimeout bounds each policy evaluation. Default
	// policy.DefaultTimeout.
	PolicyTimeout time.Duration
	// AttemptTimeout bounds each call to a system of record. Default
	// dispatch.DefaultAttemptTimeout.
	AttemptTimeout time.Duration
	// DispatchTokenTTL is the life of the actor tokens the sidecar mints
	// (exp - iat): a request may land until its token expires, so a step
	// whose effect is not found is taken as absent only after it (engine
	// doc, "Effects fenced by time"). Whole seconds, over zero and at most
	// credential.MaxTTL (120 s, the receivers' lifetime check). The
	// active bundle's token_ttl_seconds shortens it for its decisions.
	// Default credential.DefaultTTL (15 s).
	DispatchTokenTTL time.Duration
	// ReceiverClockSkew is how far behind this sidecar's clock the systems
	// of record may read exp (their clock skew plus any leeway they allow
	// past exp): a token is taken to be able to land until then. A
	// receiver that accepts tokens some time past exp needs it set at
	// least that high. Default engine.DefaultReceiverSkew (5 s).
	ReceiverClockSkew time.Duration
	// DevLogins are the one-click sign-ins of the lead's page (person id
	// to token): the dev stack's fixture leads. Production sets none.
	DevLogins map[string]string
	// PasteTokens lets the lead's page sign in with a pasted bearer
	// token: the dev stack's. Production signs in through SignIn.
	PasteTokens bool
	// SignIn, when set, signs leads in to the page with that OpenID
	// Connect provider (serve --oidc-issuer ...). Its RedirectURL, when
	// empty, is the sidecar's own URL + signin.CallbackPath (serve
	// --public-url sets it for browsers that reach the sidecar elsewhere);
	// its Clock is Clock. The provider's discovery is read at start.
	SignIn *signin.Options
	// KeyEncryptionKey seals the signing keys of actor tokens kept in a
	// shared store (PostgreSQL), where every sidecar of the fleet mints
	// with the same key: required there, the same for every sidecar
	// (serve --key-file). On bbolt the keys stay in DataDir/keys and it
	// is not used.
	KeyEncryptionKey *credential.KeyEncryptionKey
	// MCPAllowedOrigins are the web origins (scheme://host[:port], or
	// "null") whose pages may call /mcp: a request with any other Origin
	// header is refused 403 forbidden_origin before its bearer is read. A
	// request without Origin (an MCP client that is not a browser) is not
	// concerned. Default none (mcpfront.Origins).
	MCPAllowedOrigins []string
	// PublicURL is the sidecar's base URL as its clients reach it (an
	// http(s) URL, through any proxy in front): /mcp's OAuth protected
	// resource metadata names URLs under it. Default: each request's own
	// scheme and Host.
	PublicURL string
	// NotifyWebhook, when set, is the URL every approval transition is
	// posted to (package notify), signed with NotifyWebhookSecret, which
	// it then requires. Its links to the lead's page start with PublicURL,
	// or the sidecar's own URL.
	NotifyWebhook       string
	NotifyWebhookSecret []byte
	// DecisionLogURL, when set, is the HTTP sink every decision is
	// shipped to in OPA's decision-log format (package decisionship).
	DecisionLogURL string
	// AuditKeyFile is the Ed25519 private key (PEM, PKCS #8) that signs
	// the audit's checkpoints; it must exist. Default: DataDir/AuditKeyFile,
	// created on the first start.
	AuditKeyFile string
	// AuditCheckpoint says when a checkpoint is due. Zero members take
	// audit.DefaultCheckpointEvery and audit.DefaultCheckpointInterval.
	AuditCheckpoint audit.CheckpointRule
	// AuditCheckpointURL, when set, is the http(s) URL every checkpoint
	// is posted to (audit.Checkpointer): a copy outside the sidecar's
	// reach, against which a rewritten store shows.
	AuditCheckpointURL string
}

// Validate reports every problem of o at once.
func (o Options) Validate() error {
	var errs []error
	if o.DataDir == "" {
		errs = append(errs, errors.New("option DataDir is required: the sidecar keeps its state there"))
	}
	if o.Agent == "" {
		errs = append(errs, errors.New("option Agent is required: it is the act.sub of every actor token"))
	}
	for _, u := range []struct{ name, v string }{{"LedgerURL", o.LedgerURL}, {"OrdersURL", o.OrdersURL}} {
		if !isBaseURL(u.v) {
			errs = append(errs, fmt.Errorf("%s must be an http(s) base URL (got %q)", u.name, u.v))
		}
	}
	if len(o.Issuers) == 0 {
		errs = append(errs, errors.New("option Issuers needs at least one trusted identity provider"))
	}
	if o.LeaseTTL < 0 {
		errs = append(errs, fmt.Errorf("LeaseTTL %s must not be negative", o.LeaseTTL))
	}
	if o.PolicyTimeout < 0 || o.AttemptTimeout < 0 {
		errs = append(errs, fmt.Errorf("PolicyTimeout %s and AttemptTimeout %s must not be negative", o.PolicyTimeout, o.AttemptTimeout))
	}
	if _, err := mcpfront.ParseOrigins(o.MCPAllowedOrigins); err != nil {
		errs = append(errs, fmt.Errorf("MCPAllowedOrigins: %w", err))
	}
	if err := CheckPublicURL(o.PublicURL); o.PublicURL != "" && err != nil {
		errs = append(errs, fmt.Errorf("PublicURL: %w", err))
	}
	if err := CheckDispatchTokenTTL(o.DispatchTokenTTL); o.DispatchTokenTTL != 0 && err != nil {
		errs = append(errs, err)
	}
	if o.ReceiverClockSkew < 0 {
		errs = append(errs, fmt.Errorf("ReceiverClockSkew %s must not be negative", o.ReceiverClockSkew))
	}
	if o.NotifyWebhook == "" && len(o.NotifyWebhookSecret) > 0 {
		errs = append(errs, errors.New("NotifyWebhookSecret is set without NotifyWebhook: set both or neither"))
	}
	if o.NotifyWebhook != "" && !isBaseURL(o.NotifyWebhook) { // not repeated: it may hold a credential
		errs = append(errs, errors.New("NotifyWebhook must be an absolute http(s) URL"))
	}
	if o.NotifyWebhook != "" && len(o.NotifyWebhookSecret) == 0 {
		errs = append(errs, errors.New("NotifyWebhook needs NotifyWebhookSecret: every notice is signed with it"))
	}
	if o.DecisionLogURL != "" && !isBaseURL(o.DecisionLogURL) { // not repeated: it may hold a credential
		errs = append(errs, errors.New("DecisionLogURL must be an absolute http(s) URL"))
	}
	if o.AuditCheckpoint.Every < 0 || o.AuditCheckpoint.Interval < 0 {
		errs = append(errs, fmt.Errorf("AuditCheckpoint: every %d records and interval %s must not be negative",
			o.AuditCheckpoint.Every, o.AuditCheckpoint.Interval))
	}
	if o.AuditCheckpointURL != "" && !isBaseURL(o.AuditCheckpointURL) { // not repeated: it may hold a credential
		errs = append(errs, errors.New("AuditCheckpointURL must be an absolute http(s) URL"))
	}
	if len(errs) > 0 {
		return fmt.Errorf("stack: invalid options: %w", errors.Join(errs...))
	}
	return nil
}

// CheckDispatchTokenTTL says what is wrong with ttl as the life of the
// sidecar's actor tokens, or nil: it must be a whole number of seconds,
// over zero, and no longer than the systems of record accept.
func CheckDispatchTokenTTL(ttl time.Duration) error {
	switch {
	case ttl <= 0:
		return fmt.Errorf("the dispatch token TTL %s must be over zero: an actor token must live long enough to reach its system of record", ttl)
	case ttl > credential.MaxTTL:
		return fmt.Errorf("the dispatch token TTL %s is over %s: the systems of record refuse a token that lives longer (401 token_lifetime); "+
			"keep it short, since a step whose effect is not found waits that long before it is sent again", ttl, credential.MaxTTL)
	case ttl%time.Second != 0:
		return fmt.Errorf("the dispatch token TTL %s must be whole seconds: JWT times have one-second resolution", ttl)
	}
	return nil
}

// CheckPublicURL says what is wrong with v as the sidecar's public base
// URL, or nil.
func CheckPublicURL(v string) error {
	u, err := url.Parse(v)
	if err != nil || !isBaseURL(v) || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return fmt.Errorf("%q is not the base URL clients reach the sidecar at: write it like https://countersign.example.com, without a query or a fragment", v)
	}
	return nil
}

// authorizationServers are the issuers of people's tokens that are URLs,
// as OAuth names an authorization server: /mcp's protected resource
// metadata lists them. An issuer named otherwise (the dev identity
// provider's) cannot be reached by a client, and is left out.
func authorizationServers(issuers []authn.Issuer) []string {
	var out []string
	for _, is := range issuers {
		if u, err := url.Parse(is.Name); err == nil && isBaseURL(is.Name) && u.RawQuery == "" && u.Fragment == "" {
			out = append(out, is.Name)
		}
	}
	return out
}

// isBaseURL reports whether v is an absolute http or https URL with a host.
func isBaseURL(v string) bool {
	u, err := url.Parse(v)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// withDefaults returns o with every unset field at its default.
func (o Options) withDefaults() Options {
	if o.Listen == "" {
		o.Listen = DefaultListen
	}
	if o.ActivatedBy == "" {
		o.ActivatedBy = DefaultActivatedBy
	}
	if o.Clock == nil {
		o.Clock = clock.Wall{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.DispatchTokenTTL == 0 {
		o.DispatchTokenTTL = credential.DefaultTTL
	}
	return o
}
