package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"time"
)

// DefaultAgents are the agent counts of Options.Agents left empty.
func DefaultAgents() []int { return []int{1, 64} }

const (
	// DefaultDuration is Options.Duration left zero.
	DefaultDuration = 10 * time.Second
	// RefundsPerOrder is how many 1-cent refunds an agent makes on one
	// order before it adds a fresh one: $10.00, well inside p1's $50.00
	// of automatic refunds per order.
	RefundsPerOrder = 1000
	// MaxAgents bounds one cell's concurrency.
	MaxAgents = 1024
	// MaxSidecars bounds Options.Sidecars' counts.
	MaxSidecars = 16
	// MaxStoreLatency bounds Options.StoreLatency: past it a cell's few
	// seconds hold too few calls to say anything.
	MaxStoreLatency = 100 * time.Millisecond
	// requestTimeout bounds every request the bench makes.
	requestTimeout = 30 * time.Second
)

// Options configure a bench run.
type Options struct {
	// Agents lists the agent counts, one cell each. Default DefaultAgents.
	Agents []int
	// Duration is how long each cell starts new steps. Default
	// DefaultDuration.
	Duration time.Duration
	// Baseline adds the glue's cells after countersign's.
	Baseline bool
	// TwoRequests makes each countersign step two requests, as before
	// issue 25: POST /v1/workflows, then the proposal. Default: one, the
	// proposal that opens its workflow (a ticket in its body).
	TwoRequests bool
	// Sidecar is the base URL of a running `serve --dev`; empty starts the
	// dev stack in this process.
	Sidecar string
	// DataDir: with Sidecar, the data directory holding dev-tokens.json and
	// dev-endpoints.json (required). Without, where the in-process stack
	// keeps its files; it must be empty or absent. Empty: a temporary
	// directory, removed at the end.
	DataDir string
	// Store, a postgres:// URL, puts the in-process sidecars' store on
	// PostgreSQL: for each count of Options.Sidecars the bench creates a
	// fresh database on that server (CREATE DATABASE, so the URL's role
	// needs CREATEDB), starts that many sidecars on it sharing one ledger,
	// order system and identity provider, runs every agent count, and
	// drops the database. The URL's own database is only connected to.
	Store string
	// Sidecars lists the sidecar counts, with Store only. Default [1].
	Sidecars []int
	// StoreLatency, with Store only, is the round trip the bench's proxy
	// (package latency) adds between the sidecars and PostgreSQL, half
	// each way, 0 to MaxStoreLatency. The proxy stands there with Store
	// whatever its value, and counts round trips and statements; 0 adds
	// only its copying.
	StoreLatency time.Duration
	// Progress receives a line per cell. Default: discard.
	Progress io.Writer
	// Logger receives the in-process stack's logs. Default: discard.
	Logger *slog.Logger
}

// Validate reports every problem of o at once.
func (o Options) Validate() error {
	var errs []error
	for _, n := range o.Agents {
		if n < 1 || n > MaxAgents {
			errs = append(errs, fmt.Errorf("%w: an agent count must be 1 to %d, not %d", ErrOptions, MaxAgents, n))
		}
	}
	if o.Duration < 0 {
		errs = append(errs, fmt.Errorf("%w: the duration must be positive, not %v", ErrOptions, o.Duration))
	}
	errs = append(errs, o.validateStore()...)
	if o.Sidecar != "" {
		if err := loopback(o.Sidecar); err != nil {
			errs = append(errs, err)
		}
		if o.DataDir == "" {
			errs = append(errs, fmt.Errorf("%w: --sidecar needs --data, the directory where serve --dev wrote dev-tokens.json", ErrOptions))
		}
		if o.Baseline {
			errs = append(errs, ErrBaselineOutOfProcess)
		}
	}
	return errors.Join(errs...)
}

// validateStore reports the problems of Store and Sidecars.
func (o Options) validateStore() []error {
	var errs []error
	if o.Store == "" {
		if len(o.Sidecars) > 0 {
			errs = append(errs, fmt.Errorf("%w: --sidecars needs --store postgres://...: on bbolt one sidecar holds the file", ErrOptions))
		}
		if o.StoreLatency != 0 {
			errs = append(errs, fmt.Errorf("%w: --store-latency needs --store postgres://...: the delay is added in front of PostgreSQL, and bbolt is a file with no network hop", ErrOptions))
		}
		return errs
	}
	if o.StoreLatency < 0 || o.StoreLatency > MaxStoreLatency {
		errs = append(errs, fmt.Errorf("%w: --store-latency is a round trip from 0 to %v (1ms is a nearby cloud database), not %v", ErrOptions, MaxStoreLatency, o.StoreLatency))
	}
	if u, err := url.Parse(o.Store); err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		errs = append(errs, fmt.Errorf("%w: --store must be a postgres:// URL", ErrOptions))
	}
	if o.Sidecar != "" {
		errs = append(errs, fmt.Errorf("%w: --store starts sidecars in this process; drop --sidecar or --store", ErrOptions))
	}
	if o.Baseline {
		errs = append(errs, fmt.Errorf("%w: --baseline runs on the bbolt stack; run it without --store", ErrOptions))
	}
	for _, k := range o.Sidecars {
		if k < 1 || k > MaxSidecars {
			errs = append(errs, fmt.Errorf("%w: a sidecar count must be 1 to %d, not %d", ErrOptions, MaxSidecars, k))
		}
	}
	return errs
}

// loopback checks that raw is an http URL of this machine.
func loopback(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return fmt.Errorf("%w: %q is not an http://host:port URL", ErrOptions, raw)
	}
	if h := u.Hostname(); h == "localhost" {
		return nil
	} else if ip := net.ParseIP(h); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrNotLoopback, raw)
}

func (o Options) withDefaults() Options {
	if len(o.Agents) == 0 {
		o.Agents = DefaultAgents()
	}
	if o.Duration == 0 {
		o.Duration = DefaultDuration
	}
	if o.Store != "" && len(o.Sidecars) == 0 {
		o.Sidecars = []int{1}
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Run measures countersign (and with o.Baseline the glue) for each agent
// count and returns the report.
func Run(ctx context.Context, o Options) (_ *Report, err error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	o = o.withDefaults()
	if o.Store != "" {
		return runFleets(ctx, o)
	}
	tg, cleanup, err := openTarget(ctx, o)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := cleanup(); cerr != nil && err == nil {
			err = fmt.Errorf("bench: stop the stack: %w", cerr)
		}
	}()
	r := newReport(o, tg)
	for _, n := range o.Agents {
		row, err := runCell(ctx, o, tg, n, countersign{twoRequests: o.TwoRequests})
		if err != nil {
			return nil, err
		}
		r.add(o.Progress, row)
	}
	if !o.Baseline {
		return r, nil
	}
	g, err := startGlue(ctx, tg)
	if err != nil {
		return nil, err
	}
	defer g.close()
	for _, n := range o.Agents {
		row, err := runCell(ctx, o, tg, n, g)
		if err != nil {
			return nil, err
		}
		r.add(o.Progress, row)
	}
	r.ratios()
	return r, nil
}

// tempDir is dir, or a fresh temporary directory and its removal.
func tempDir(dir string) (string, func() error, error) {
	if dir != "" {
		if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
			return "", nil, fmt.Errorf("%w: %s is not empty: the in-process stack starts from nothing", ErrOptions, dir)
		}
		return dir, func() error { return nil }, nil
	}
	tmp, err := os.MkdirTemp("", "countersign-bench-")
	if err != nil {
		return "", nil, err
	}
	return tmp, func() error { return os.RemoveAll(tmp) }, nil
}
