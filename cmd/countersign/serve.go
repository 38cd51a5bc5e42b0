package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/countersign/countersign/cmd/config"
	"github.com/countersign/countersign/cmd/devstack"
	"github.com/countersign/countersign/cmd/stack"
	"github.com/countersign/countersign/executor/audit"
	"github.com/countersign/countersign/executor/credential"
	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/notify"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/sidecar/authn"
	"github.com/countersign/countersign/sidecar/mcpfront"
	"github.com/countersign/countersign/sidecar/signin"
)

// serveFlags are serve's command line.
type serveFlags struct {
	// configFile is the YAML file of settings (cmd/config).
	configFile string
	dev        bool
	data       string
	storeURL   string
	// storeFile holds storeURL, out of the process list.
	storeFile     string
	listen        string
	bundle        string
	agent         string
	ledgerURL     string
	ordersURL     string
	issuer        string
	issuerJWKS    string
	policyTimeout time.Duration
	leaseTTL      time.Duration
	tokenTTL      time.Duration
	skew          time.Duration
	// verificationKey and verificationKeyID require signed bundles.
	verificationKey   string
	verificationKeyID string
	// keyFile holds the fleet's key-encryption key.
	keyFile string
	// mcpOrigins are the web origins whose pages may call /mcp.
	mcpOrigins []string
	// publicURL is the sidecar's base URL as clients and browsers reach it.
	publicURL string
	// notifyWebhook gets the approval notices, signed with the secret in
	// notifySecretFile.
	notifyWebhook    string
	notifySecretFile string
	// decisionLogURL gets every decision in OPA's decision-log format.
	decisionLogURL string
	// oidcIssuer, oidcClientID and oidcSecretFile sign leads in to the
	// page.
	oidcIssuer     string
	oidcClientID   string
	oidcSecretFile string
	// logLevel and logFormat shape the log on stderr (newLogger).
	logLevel  string
	logFormat string
	// auditKeyFile signs the audit's checkpoints, made every
	// auditCheckpoint.Every records or Interval and posted to
	// auditCheckpointURL.
	auditKeyFile       string
	auditCheckpoint    audit.CheckpointRule
	auditCheckpointURL string
}

// testHooks are the crash tests' failpoint and removed controls: both nil
// unless the binary was built with -tags failpoints (see failpoint.go).
type testHooks struct {
	failpoint func(string) error
	controls  *engine.Controls
}

func newServeCmd() *cobra.Command { return newServeCmdFor(new(serveFlags)) }

// newServeCmdFor is serve with its flags bound to f, which config check
// reads.
func newServeCmdFor(f *serveFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve (--dev | --agent ID --ledger URL --orders URL --issuer NAME --issuer-jwks URL|FILE) --data DIR [--store postgres://...]",
		Short: "Run the sidecar (with --dev: with the ledger, the order system and a dev identity provider)",
		Long: `Run the countersign sidecar until SIGTERM or SIGINT, then shut down cleanly.

Without --dev it speaks for the agent --agent, talks to the ledger and the
order system at --ledger and --orders, trusts people's tokens from --issuer
signed with the keys at --issuer-jwks (an https URL, refreshed, or a file),
and stays not ready (503) until an operator activates a bundle through the
gate (POST /v1/bundles) or --bundle names one. The systems of record must
verify actor tokens against this sidecar's /.well-known/jwks.json.

With --bundle-verification-key it activates and restores only bundles
signed with that key (by countersign bundle build --signing-key or opa
build --signing-key); an unsigned or wrongly signed upload is answered 422
bundle_signature_invalid. Without it no signature is required, and a
signed bundle loads with its signature unchecked.

Every flag --NAME is also the environment variable COUNTERSIGN_NAME
(upper-cased, '-' as '_': COUNTERSIGN_ISSUER_JWKS) and the key NAME: of
the YAML file --config FILE (or COUNTERSIGN_CONFIG) names; a flag wins
over its variable, which wins over the file. --store-file FILE gives the
--store URL out of the process list. countersign config check FILE lists
every problem of a file. Missing or wrong settings are named all at once.

With --dev it also starts the simulated ledger and order system and the dev
identity provider on loopback ports, loads the embedded bundle p1 (or
--bundle PATH) and the Quillfeather fixture, and writes DIR/dev-endpoints.json
and DIR/dev-tokens.json (a bearer token valid 24 h for every fixture person).
All state stays under DIR: a restarted sidecar finds the ledger, the order
system and its workflows as they were.

With --store postgres://... the store (workflows, approvals, caps, the
decision log, the audit, bundles, switches and modes) is that PostgreSQL
database, its schema created or migrated at start, and every sidecar given
the same URL shares it: a fleet. --data stays this sidecar's own directory
(its PID file; with --dev the simulators and the identity provider). A
first sidecar may run --dev --store URL; others join with the production
flags pointed at its endpoints (DIR/dev-endpoints.json) and the same
--store. Every sidecar of the fleet, the first included, takes the same
--key-file, which seals the fleet's signing keys in the database.

The lead's page (/approvals) signs leads in with the organisation's
OpenID Connect provider: --oidc-issuer, --oidc-client-id and
--oidc-client-secret-file name the provider and this sidecar's
registration there, whose redirect URL is --public-url (the sidecar as
browsers reach it; default its own address) followed by /login/callback.
The provider's ID tokens must carry the claims of the API's bearer tokens
(sub, role lead, region, approve_limit). Without them the page says how
to configure sign-in; --dev signs in at the dev identity provider.

A web page may call /mcp only from an origin listed in
--mcp-allowed-origins (none by default): a request whose Origin header is
another is refused 403 forbidden_origin before its token is read, against
DNS rebinding. MCP clients that are not browsers send no Origin and are
not concerned.

/mcp serves its OAuth protected resource metadata (RFC 9728) at
/.well-known/oauth-protected-resource, naming --issuer as its
authorization server when it is a URL, and a 401 on /mcp points to it, so
that an MCP client finds where to get a token. Behind a proxy that changes
the scheme or host, pass --public-url with the URL clients use.

With --notify-webhook URL every approval requested, and every decision on
it (approved, rejected, expired, void, used), is posted to URL as JSON
whose text field Slack-compatible incoming webhooks display, signed in the
Countersign-Signature header with the secret in
--notify-webhook-secret-file. Its link to the lead's page starts with
--public-url (default the sidecar's own address).

With --decision-log-url URL every decision is also shipped to URL as OPA's
decision-log plugin ships its own (a gzip-compressed JSON array of events
with decision_id, path, input, result, bundles, labels and requested_by),
in batches, retried until the sink takes them; a sink that stays down
costs the oldest buffered events (countersign_decision_logs_dropped_total),
never a call.`,
		Example: `  countersign serve --dev --data /tmp/cs
  curl -s -H "Authorization: Bearer $(jq -r '."rep-ana"' /tmp/cs/dev-tokens.json)" \
    "$(jq -r .sidecar /tmp/cs/dev-endpoints.json)/v1/tools"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return f.run(cmd, os.LookupEnv) },
	}
	cmd.Flags().StringVar(&f.configFile, "config", "",
		"YAML file of settings whose keys are these flags' names (listen: 0.0.0.0:8080); every flag --NAME is also the environment variable COUNTERSIGN_NAME ('-' as '_'); a flag wins over its variable, which wins over the file (check one with countersign config check FILE)")
	cmd.Flags().StringVar(&f.storeFile, "store-file", "", "a file holding the --store URL (surrounding white space ignored), which keeps the database password out of the process list")
	cmd.Flags().BoolVar(&f.dev, "dev", false, "run with the simulated systems of record and the dev identity provider")
	cmd.Flags().StringVar(&f.data, "data", "", "data directory (state, keys, simulators)")
	cmd.Flags().StringVar(&f.storeURL, "store", "", "a postgres:// URL: keep the state in that PostgreSQL database, shared by a fleet of sidecars (default: bbolt under --data)")
	cmd.Flags().DurationVar(&f.leaseTTL, "lease-ttl", engine.DefaultLeaseTTL, "with --store: how long a workflow stays leased to a sidecar that stopped renewing it (was killed) before another takes it over")
	cmd.Flags().StringVar(&f.listen, "listen", stack.DefaultListen, "sidecar listen address")
	cmd.Flags().StringVar(&f.bundle, "bundle", "", "policy bundle directory or .tar.gz to activate through the gate (dev default: the embedded p1)")
	cmd.Flags().StringVar(&f.agent, "agent", "", "the agent this sidecar speaks for, the act.sub of every actor token (required without --dev; --dev default "+devstack.AgentID+")")
	cmd.Flags().StringVar(&f.ledgerURL, "ledger", "", "the ledger's base URL (without --dev)")
	cmd.Flags().StringVar(&f.ordersURL, "orders", "", "the order system's base URL (without --dev)")
	cmd.Flags().StringVar(&f.issuer, "issuer", "", "the iss of trusted people's tokens (without --dev)")
	cmd.Flags().DurationVar(&f.tokenTTL, "dispatch-token-ttl", credential.DefaultTTL,
		"life of the actor tokens the sidecar mints, whole seconds, at most 120s (the systems of record refuse longer); "+
			"a step whose effect is not found is sent again only after its tokens have expired, so keep it short (the bundle's token_ttl_seconds may shorten it)")
	cmd.Flags().DurationVar(&f.skew, "receiver-clock-skew", engine.DefaultReceiverSkew,
		"how far past a token's exp the systems of record may still accept it (their clock skew, plus any leeway they allow); "+
			"a step whose effect is not found is sent again only after its tokens' exp plus this")
	cmd.Flags().DurationVar(&f.policyTimeout, "policy-timeout", policy.DefaultTimeout, "deadline of each policy evaluation; past it the call fails closed with 503 policy_timeout")
	cmd.Flags().StringVar(&f.issuerJWKS, "issuer-jwks", "", "the issuer's JWKS: an http(s) URL or a file (without --dev)")
	cmd.Flags().StringVar(&f.verificationKey, "bundle-verification-key", "",
		"PEM public key every bundle must be signed with, in OPA's format (.signatures.json): the one at start, the one restored and every upload (without --dev)")
	cmd.Flags().StringVar(&f.verificationKeyID, "bundle-verification-key-id", policy.DefaultKeyID, "the key id the signatures must name (with --bundle-verification-key)")
	cmd.Flags().StringSliceVar(&f.mcpOrigins, "mcp-allowed-origins", nil,
		"web origins (scheme://host[:port], comma-separated or repeated; \"null\" for opaque origins) whose pages may call /mcp; a request with another Origin header is 403 forbidden_origin, one without Origin is not concerned (default none)")
	cmd.Flags().StringVar(&f.publicURL, "public-url", "",
		"the sidecar's base URL as clients and browsers reach it, through any proxy in front (scheme://host[:port], e.g. https://countersign.example.com): /mcp's OAuth protected resource metadata, the lead page's sign-in redirect URL (it + /login/callback) and the notices' links are under it (default: each request's own scheme and Host, or the sidecar's own address)")
	cmd.Flags().StringVar(&f.notifyWebhook, "notify-webhook", "",
		"URL to POST each approval requested and each decision on it to (JSON with a Slack-compatible text field), signed with --notify-webhook-secret-file")
	cmd.Flags().StringVar(&f.notifySecretFile, "notify-webhook-secret-file", "",
		"file holding the secret the notices are signed with (HMAC-SHA256, header Countersign-Signature); the receiver keeps the same (required with --notify-webhook)")
	cmd.Flags().StringVar(&f.decisionLogURL, "decision-log-url", "",
		"URL to POST every decision to in OPA's decision-log format (gzip JSON array, batched, retried), for the tools that read OPA's decision logs")
	cmd.Flags().StringVar(&f.oidcIssuer, "oidc-issuer", "",
		"the lead page's sign-in: the OpenID Connect provider's issuer URL (its discovery document is read at start; without --dev)")
	cmd.Flags().StringVar(&f.oidcClientID, "oidc-client-id", "", "with --oidc-issuer: this sidecar's client id at the provider")
	cmd.Flags().StringVar(&f.oidcSecretFile, "oidc-client-secret-file", "",
		"with --oidc-issuer: a file holding the client's secret (mode 0600; surrounding white space is ignored)")
	cmd.Flags().StringVar(&f.keyFile, "key-file", "",
		"file with the fleet's key-encryption key (32 random bytes, base64; make one with countersign keyfile -o FILE): required on a store shared by several sidecars, which keeps the signing keys sealed with it (without --dev)")
	cmd.Flags().StringVar(&f.logLevel, "log-level", "info",
		"the least level logged: debug, info, warn or error (the probes' and /metrics scrapes' request lines are debug, a 4xx's info, a 5xx's error)")
	cmd.Flags().StringVar(&f.auditKeyFile, "audit-key-file", "",
		"the Ed25519 private key (PEM, PKCS #8: openssl genpkey -algorithm ed25519) that signs the audit's checkpoints; default DATA/"+stack.AuditKeyFile+", created on the first start")
	cmd.Flags().IntVar(&f.auditCheckpoint.Every, "audit-checkpoint-every", audit.DefaultCheckpointEvery,
		"sign an audit checkpoint once this many records have been chained since the last one")
	cmd.Flags().DurationVar(&f.auditCheckpoint.Interval, "audit-checkpoint-interval", audit.DefaultCheckpointInterval,
		"sign an audit checkpoint at least this often while records are chained (none while nothing happens)")
	cmd.Flags().StringVar(&f.auditCheckpointURL, "audit-checkpoint-url", "",
		"post every signed audit checkpoint (JSON) to this http(s) URL, outside the sidecar's reach; retried with backoff, never in a call's way")
	cmd.Flags().StringVar(&f.logFormat, "log-format", "json", "the log's form on stderr: json (one object per line) or text (key=value)")
	return cmd
}

// run reads the settings the command line left to the environment and the
// config file, starts the sidecar they ask for and serves until the
// command's context ends (SIGTERM or SIGINT).
func (f *serveFlags) run(cmd *cobra.Command, lookupEnv func(string) (string, bool)) error {
	settings, p, err := f.settle(cmd.Flags(), lookupEnv)
	if err != nil {
		return err
	}
	log, err := newLogger(os.Stderr, f.logLevel, f.logFormat)
	if err != nil {
		return err
	}
	hooks, err := loadTestHooks(log)
	if err != nil {
		return err
	}
	start := f.startProduction
	if f.dev {
		start = f.startDev
	}
	closer, err := start(cmd, log, hooks, p)
	if err != nil {
		return withFlagAdvice(err)
	}
	// Where each setting came from, never its value: a value may be a secret.
	log.Info("settings", "config", settings.File, "from_environment", settings.Keys(config.FromEnv), "from_file", settings.Keys(config.FromFile))
	<-cmd.Context().Done()
	log.Info("shutting down")
	return closer.Close()
}

// settle fills the flags of fs (f's) that the command line left unset from
// the environment and the config file, then checks every setting; it
// returns every problem of both at once as a *settingsError.
func (f *serveFlags) settle(fs *pflag.FlagSet, lookupEnv func(string) (string, bool)) (*config.Settings, prepared, error) {
	settings, err := config.Load(fs, "config", lookupEnv)
	problems := leaves(err)
	p, more := f.prepare()
	problems = append(problems, more...)
	if len(problems) > 0 {
		return settings, p, &settingsError{problems: problems, production: p.production}
	}
	f.storeURL = p.store
	return settings, p, nil
}

// prepared is what serve's settings give once checked, read before
// anything starts.
type prepared struct {
	store        string // the PostgreSQL URL, from --store or --store-file
	notifySecret []byte
	bundle       *policy.Bundle
	kek          *credential.KeyEncryptionKey // with --dev; production has it in opts
	opts         stack.Options                // without --dev
	// production is set when the production settings are missing or
	// wrong: --dev is the other way to start.
	production bool
}

// prepare checks every setting and reads every file one names, starting
// nothing, and returns every problem at once: serve refuses to start on
// any, and config check lists them.
func (f serveFlags) prepare() (prepared, []error) {
	var (
		p        prepared
		problems []error
		err      error
	)
	add := func(err error) { problems = append(problems, leaves(err)...) }
	if f.data == "" {
		add(errors.New("--data DIR is required: the sidecar keeps its state there"))
	}
	add(f.devConflicts())
	p.store, err = f.store()
	add(err)
	f.storeURL = p.store
	if f.dev && f.keyFile != "" && f.storeURL == "" {
		add(errors.New("--key-file is for a fleet of sidecars on a shared store (--store): without it --dev keeps its signing keys under --data"))
	}
	if _, err := mcpfront.ParseOrigins(f.mcpOrigins); err != nil {
		add(fmt.Errorf("--mcp-allowed-origins: %w", err))
	}
	p.notifySecret, err = f.notifySecret()
	add(err)
	if err := stack.CheckPublicURL(f.publicURL); f.publicURL != "" && err != nil {
		add(fmt.Errorf("--public-url: %w", err))
	}
	if err := stack.CheckDispatchTokenTTL(f.tokenTTL); err != nil {
		add(fmt.Errorf("--dispatch-token-ttl: %w", err))
	}
	if f.skew <= 0 {
		add(fmt.Errorf("--receiver-clock-skew %s must be over zero: no two clocks agree exactly", f.skew))
	}
	add(f.checkAudit())
	if _, err := newLogger(io.Discard, f.logLevel, f.logFormat); err != nil {
		add(err)
	}
	p.bundle, err = f.loadBundle()
	add(err)
	if f.dev {
		p.kek, err = f.keyEncryptionKey() // a first sidecar of a fleet (--store) mints with the fleet's keys
	} else {
		p.opts, err = f.production()
		p.production = err != nil
	}
	add(err)
	// The JWKS file is read when the stack starts; config check, which
	// starts nothing, names it here when it is not there.
	if !f.dev && f.issuerJWKS != "" && !strings.HasPrefix(f.issuerJWKS, "http://") && !strings.HasPrefix(f.issuerJWKS, "https://") {
		if _, err := os.Stat(f.issuerJWKS); err != nil {
			add(fmt.Errorf("--issuer-jwks: %w", err))
		}
	}
	return p, problems
}

// store is the PostgreSQL URL of --store or of the file --store-file
// names, "" for none. Its problems never repeat the URL, which holds the
// database password.
func (f serveFlags) store() (string, error) {
	switch {
	case f.storeFile == "":
		return f.storeURL, nil
	case f.storeURL != "":
		return "", errors.New("--store and --store-file are both given: pass the database URL one way (--store-file keeps it out of the process list)")
	}
	b, err := os.ReadFile(f.storeFile)
	if err != nil {
		return "", fmt.Errorf("--store-file: %w", err)
	}
	url := strings.TrimSpace(string(b))
	if url == "" {
		return "", fmt.Errorf("--store-file %s is empty: write the database's postgres:// URL in it", f.storeFile)
	}
	return url, nil
}

// settingsError is every problem with serve's settings, one a line, with
// how to set each and, when production settings are at fault, the other
// way to start. One problem stays one line.
type settingsError struct {
	problems   []error
	production bool
}

const orDev = "or pass --dev to run with the simulated systems"

func (e *settingsError) Error() string {
	if len(e.problems) == 1 && e.production {
		return e.problems[0].Error() + " (" + orDev + ")"
	}
	if len(e.problems) == 1 {
		return e.problems[0].Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "serve cannot start, %d %s to fix:", len(e.problems), plural(len(e.problems), "setting", "settings"))
	for _, p := range e.problems {
		b.WriteString("\n  " + p.Error())
	}
	b.WriteString("\nset each as a flag --NAME, as the environment variable COUNTERSIGN_NAME ('-' as '_') or as the key NAME: of the --config file (countersign config check FILE lists a file's problems)")
	if e.production {
		b.WriteString("; " + orDev)
	}
	return b.String()
}

func (e *settingsError) Unwrap() []error { return e.problems }

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// leaves flattens joined errors into their parts, nil into none.
func leaves(err error) []error {
	if err == nil {
		return nil
	}
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []error{err}
	}
	var out []error
	for _, e := range j.Unwrap() {
		out = append(out, leaves(e)...)
	}
	return out
}

type closer interface{ Close() error }

// devConflicts refuses, with --dev, every production flag that --dev would
// otherwise ignore, naming all of them at once: an operator who passes
// --dev --ledger URL believes money moves at URL while the simulator
// answers.
func (f serveFlags) devConflicts() error {
	if !f.dev {
		return nil
	}
	groups := []struct {
		why   string
		flags []struct{ name, value string }
	}{
		{"--dev runs its own simulated ledger and order system and its dev identity provider", []struct{ name, value string }{
			{"--ledger", f.ledgerURL}, {"--orders", f.ordersURL}, {"--issuer", f.issuer}, {"--issuer-jwks", f.issuerJWKS}}},
		{"--dev loads the embedded releases, which are not signed", []struct{ name, value string }{
			{"--bundle-verification-key", f.verificationKey}}},
		{"--dev signs leads in at the dev identity provider", []struct{ name, value string }{
			{"--oidc-issuer", f.oidcIssuer}, {"--oidc-client-id", f.oidcClientID}, {"--oidc-client-secret-file", f.oidcSecretFile}}},
	}
	var given, why []string
	for _, g := range groups {
		n := len(given)
		for _, fl := range g.flags {
			if fl.value != "" {
				given = append(given, fl.name)
			}
		}
		if len(given) > n {
			why = append(why, g.why)
		}
	}
	if len(given) == 0 {
		return nil
	}
	return fmt.Errorf("%s: production flags that --dev would ignore (%s); drop them, or drop --dev to serve the real systems",
		strings.Join(given, ", "), strings.Join(why, "; "))
}

func loadTestHooks(log *slog.Logger) (testHooks, error) {
	fail, err := failpointHook(log)
	if err != nil {
		return testHooks{}, err
	}
	controls, err := removedControls(log)
	return testHooks{failpoint: fail, controls: controls}, err
}

// loadBundle reads --bundle, or nil when it is not given.
func (f serveFlags) loadBundle() (*policy.Bundle, error) {
	if f.bundle == "" {
		return nil, nil
	}
	b, err := policy.LoadPath(f.bundle)
	if err != nil {
		return nil, fmt.Errorf("--bundle %s: %w", f.bundle, err)
	}
	return b, nil
}

// startProduction runs the production wiring alone: no simulator, no dev
// identity provider, no fixture.
func (f serveFlags) startProduction(cmd *cobra.Command, log *slog.Logger, h testHooks, p prepared) (closer, error) {
	opts := p.opts
	opts.NotifyWebhook, opts.NotifyWebhookSecret = f.notifyWebhook, p.notifySecret
	opts.DecisionLogURL = f.decisionLogURL
	opts.Listen, opts.Logger, opts.Bundle, opts.Background = f.listen, log, p.bundle, true
	opts.Failpoint, opts.Controls, opts.PolicyTimeout = h.failpoint, h.controls, f.policyTimeout
	opts.DispatchTokenTTL, opts.ReceiverClockSkew = f.tokenTTL, f.skew
	opts.AuditKeyFile, opts.AuditCheckpoint, opts.AuditCheckpointURL = f.auditKeyFile, f.auditCheckpoint, f.auditCheckpointURL
	st, err := stack.Start(cmd.Context(), opts)
	if err != nil {
		return nil, err
	}
	log.Info("countersign serving", "dev", false, "sidecar", st.URL, "ledger", opts.LedgerURL,
		"orders", opts.OrdersURL, "policy_revision", st.Policy.Revision(), "data", f.data, "mcp_allowed_origins", f.mcpOrigins)
	fmt.Fprintf(cmd.OutOrStdout(), "countersign sidecar on %s; SIGTERM to stop\n", st.URL)
	return st, nil
}

// startDev runs the dev stack and writes its endpoints and tokens.
func (f serveFlags) startDev(cmd *cobra.Command, log *slog.Logger, h testHooks, p prepared) (closer, error) {
	st, err := devstack.Start(cmd.Context(), devstack.Options{
		DataDir: f.data, StoreURL: f.storeURL, LeaseTTL: f.leaseTTL, KeyEncryptionKey: p.kek, Listen: f.listen, Agent: f.agent,
		Logger: log, Failpoint: h.failpoint, Controls: h.controls, Background: true, PolicyTimeout: f.policyTimeout, Bundle: p.bundle,
		MCPAllowedOrigins: f.mcpOrigins, PublicURL: f.publicURL,
		DispatchTokenTTL: f.tokenTTL, ReceiverClockSkew: f.skew,
		NotifyWebhook: f.notifyWebhook, NotifyWebhookSecret: p.notifySecret,
		DecisionLogURL: f.decisionLogURL,
		AuditKeyFile:   f.auditKeyFile, AuditCheckpoint: f.auditCheckpoint, AuditCheckpointURL: f.auditCheckpointURL,
	})
	if err != nil {
		return nil, err
	}
	log.Info("countersign serving", "dev", true, "sidecar", st.Endpoints.Sidecar, "ledger", st.Endpoints.Ledger,
		"orders", st.Endpoints.Orders, "policy_revision", st.Policy.Revision(), "data", f.data, "mcp_allowed_origins", f.mcpOrigins)
	if err := st.WriteFiles(f.data); err != nil {
		st.Close()
		return nil, err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "countersign sidecar on %s (tokens in %s/dev-tokens.json); SIGTERM to stop\n", st.Endpoints.Sidecar, f.data)
	return st, nil
}

// withFlagAdvice adds to a start-up problem a person fixes which flag to
// change, keeping it one line.
func withFlagAdvice(err error) error {
	if errors.Is(err, policy.ErrSignatureInvalid) {
		return fmt.Errorf("%w: pass --bundle with a bundle signed by the private key of --bundle-verification-key", err)
	}
	var se *stack.StartError
	if !errors.As(err, &se) {
		return err
	}
	switch se.Kind {
	case stack.ErrAddrInUse:
		return fmt.Errorf("%w: stop it or pass --listen with another address", err)
	case stack.ErrDataDirLocked:
		return fmt.Errorf("%w: stop it or pass --data with another directory", err)
	}
	return fmt.Errorf("%w: pass --data with a directory this user can write", err)
}

// production checks the production flags, reporting every problem at once
// in the flags' own terms (joined), and returns the options they give.
func (f serveFlags) production() (stack.Options, error) {
	var problems []error
	if f.agent == "" {
		problems = append(problems, errors.New("--agent must name the agent this sidecar speaks for"))
	}
	for _, u := range []struct{ flag, v string }{{"--ledger", f.ledgerURL}, {"--orders", f.ordersURL}} {
		if !isBaseURL(u.v) {
			problems = append(problems, fmt.Errorf("%s must be the http(s) base URL of the system (got %q)", u.flag, u.v))
		}
	}
	if f.issuer == "" {
		problems = append(problems, errors.New("--issuer must name the iss of people's tokens"))
	}
	is := authn.Issuer{Name: f.issuer}
	switch {
	case strings.HasPrefix(f.issuerJWKS, "http://") || strings.HasPrefix(f.issuerJWKS, "https://"):
		is.JWKSURL = f.issuerJWKS
	case f.issuerJWKS != "":
		is.JWKSFile = f.issuerJWKS
	default:
		problems = append(problems, errors.New("--issuer-jwks must be the issuer's JWKS URL or file"))
	}
	verifier, err := f.bundleVerifier()
	if err != nil {
		problems = append(problems, err)
	}
	kek, err := f.keyEncryptionKey()
	if err != nil {
		problems = append(problems, err)
	}
	signIn, err := f.signIn()
	if err != nil {
		problems = append(problems, err)
	}
	if len(problems) > 0 {
		return stack.Options{}, errors.Join(problems...)
	}
	return stack.Options{DataDir: f.data, StoreURL: f.storeURL, LeaseTTL: f.leaseTTL, Agent: f.agent, LedgerURL: f.ledgerURL, OrdersURL: f.ordersURL, Issuers: []authn.Issuer{is},
		BundleVerifier: verifier, KeyEncryptionKey: kek, MCPAllowedOrigins: f.mcpOrigins, PublicURL: f.publicURL, SignIn: signIn}, nil
}

// notifySecret reads --notify-webhook-secret-file when --notify-webhook is
// given, saying what to do when either is missing or the file is empty.
func (f serveFlags) notifySecret() ([]byte, error) {
	howTo := func(file string) string {
		return "write a random secret to it (for example: openssl rand -hex 32 > " + file + ") and give the webhook's receiver the same"
	}
	switch {
	case f.notifyWebhook == "" && f.notifySecretFile == "":
		return nil, nil
	case f.notifyWebhook == "":
		return nil, errors.New("--notify-webhook-secret-file is only used with --notify-webhook URL: pass both, or neither")
	case !isBaseURL(f.notifyWebhook): // not repeated: a chat webhook's URL is its credential
		return nil, errors.New("--notify-webhook must be an absolute http(s) URL")
	case f.notifySecretFile == "":
		return nil, errors.New("--notify-webhook needs --notify-webhook-secret-file FILE, the secret every notice is signed with: " + howTo("FILE"))
	}
	secret, err := notify.ReadSecretFile(f.notifySecretFile)
	if err != nil {
		return nil, fmt.Errorf("--notify-webhook-secret-file: %w: %s", err, howTo(f.notifySecretFile))
	}
	return secret, nil
}

// signIn reads the --oidc-* flags and --public-url: nil when no provider
// is given, every problem at once when they do not fit together.
func (f serveFlags) signIn() (*signin.Options, error) {
	if f.oidcIssuer == "" && f.oidcClientID == "" && f.oidcSecretFile == "" {
		return nil, nil
	}
	var problems []error
	if !isBaseURL(f.oidcIssuer) {
		problems = append(problems, fmt.Errorf("--oidc-issuer must be the provider's issuer URL (got %q)", f.oidcIssuer))
	}
	if f.oidcClientID == "" {
		problems = append(problems, errors.New("--oidc-client-id must name this sidecar's client at the provider"))
	}
	o := &signin.Options{Issuer: f.oidcIssuer, ClientID: f.oidcClientID}
	if f.oidcSecretFile == "" {
		problems = append(problems, errors.New("--oidc-client-secret-file must name the file holding the client's secret"))
	} else if b, err := os.ReadFile(f.oidcSecretFile); err != nil {
		problems = append(problems, fmt.Errorf("--oidc-client-secret-file: %w", err))
	} else if o.ClientSecret = strings.TrimSpace(string(b)); o.ClientSecret == "" {
		problems = append(problems, fmt.Errorf("--oidc-client-secret-file %s is empty", f.oidcSecretFile))
	}
	if f.publicURL != "" {
		u, err := url.Parse(f.publicURL)
		if err != nil || !isBaseURL(f.publicURL) || strings.Trim(u.Path, "/") != "" || u.RawQuery != "" {
			problems = append(problems, fmt.Errorf("--public-url must be scheme://host[:port] without a path (got %q)", f.publicURL))
		} else {
			o.RedirectURL = strings.TrimSuffix(f.publicURL, "/") + signin.CallbackPath
		}
	}
	return o, errors.Join(problems...)
}

// keyEncryptionKey reads --key-file, or nil when it is not given.
func (f serveFlags) keyEncryptionKey() (*credential.KeyEncryptionKey, error) {
	if f.keyFile == "" {
		return nil, nil
	}
	kek, err := credential.ReadKeyFile(f.keyFile)
	if err != nil {
		return nil, fmt.Errorf("--key-file: %w", err)
	}
	return kek, nil
}

// bundleVerifier reads --bundle-verification-key, or nil when it is not
// given.
func (f serveFlags) bundleVerifier() (*policy.Verifier, error) {
	if f.verificationKey == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(f.verificationKey)
	if err != nil {
		return nil, fmt.Errorf("--bundle-verification-key: %w", err)
	}
	v, err := policy.NewVerifier(pem, f.verificationKeyID)
	if err != nil {
		return nil, fmt.Errorf("--bundle-verification-key %s: %w", f.verificationKey, err)
	}
	return v, nil
}

// isBaseURL reports whether v is an absolute http or https URL with a host.
func isBaseURL(v string) bool {
	u, err := url.Parse(v)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}
