package decisionship

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Defaults of Options.
const (
	DefaultBatchSize      = 100
	DefaultFlushEvery     = 5 * time.Second
	DefaultBufferSize     = 10000
	DefaultFirstBackoff   = 500 * time.Millisecond
	DefaultMaxBackoff     = 30 * time.Second
	DefaultAttemptTimeout = 10 * time.Second
)

// Options configure a Shipper. URL is required.
type Options struct {
	// URL is the sink every batch is POSTed to. It is not logged: a sink's
	// URL may carry its credential.
	URL string
	// Labels are set on every event (Ship overwrites the event's own).
	Labels Labels
	// BatchSize is the most events one POST carries; a batch is sent as
	// soon as this many wait. Default DefaultBatchSize.
	BatchSize int
	// FlushEvery is the longest an event waits for its batch to fill.
	// Default DefaultFlushEvery.
	FlushEvery time.Duration
	// BufferSize bounds the events waiting to be sent (besides the batch
	// in flight); past it the oldest is dropped. Default DefaultBufferSize.
	BufferSize int
	// FirstBackoff is the wait before a failed batch is sent again; each
	// later wait doubles, up to MaxBackoff. Defaults DefaultFirstBackoff
	// and DefaultMaxBackoff.
	FirstBackoff, MaxBackoff time.Duration
	// AttemptTimeout bounds each POST. Default DefaultAttemptTimeout.
	AttemptTimeout time.Duration
	Logger         *slog.Logger
	// Registerer gets countersign_decision_logs_dropped_total and
	// countersign_decision_logs_shipped_total. Optional.
	Registerer prometheus.Registerer
}

// Validate reports every problem of o at once.
func (o Options) Validate() error {
	var errs []error
	if u, err := url.Parse(o.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, errors.New("the decision-log URL must be an absolute http(s) URL"))
	}
	if o.BatchSize < 0 || o.BufferSize < 0 || o.FlushEvery < 0 || o.FirstBackoff < 0 || o.MaxBackoff < 0 || o.AttemptTimeout < 0 {
		errs = append(errs, errors.New("BatchSize, BufferSize, FlushEvery, FirstBackoff, MaxBackoff and AttemptTimeout must not be negative"))
	}
	if len(errs) > 0 {
		return fmt.Errorf("decisionship: invalid options: %w", errors.Join(errs...))
	}
	return nil
}

func (o Options) withDefaults() Options {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	defDur := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	def(&o.BatchSize, DefaultBatchSize)
	def(&o.BufferSize, DefaultBufferSize)
	defDur(&o.FlushEvery, DefaultFlushEvery)
	defDur(&o.FirstBackoff, DefaultFirstBackoff)
	defDur(&o.MaxBackoff, DefaultMaxBackoff)
	defDur(&o.AttemptTimeout, DefaultAttemptTimeout)
	o.MaxBackoff = max(o.MaxBackoff, o.FirstBackoff)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Shipper sends decision-log events to a sink in batches, from a bounded
// buffer, on one goroutine of its own (the package documentation says
// how). New starts it, Close stops it.
type Shipper struct {
	o       Options
	log     *slog.Logger
	client  *http.Client
	dropped prometheus.Counter
	shipped prometheus.Counter

	mu      sync.Mutex
	buf     []Event // waiting, oldest first; at most o.BufferSize
	full    bool    // the buffer has dropped since it last had room: warned once
	closing bool
	wake    chan struct{} // a batch is full, or Close was called (cap 1)

	stop   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// New checks o and starts the sender.
func New(o Options) (*Shipper, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	o = o.withDefaults()
	s := &Shipper{
		o: o, log: o.Logger.With("component", "decisionship"),
		client: &http.Client{
			Timeout: o.AttemptTimeout,
			// A redirect would turn the POST into a GET: configure the
			// URL it points to instead.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "countersign_decision_logs_dropped_total",
			Help: "Decision-log events not shipped to --decision-log-url: the buffer was full (the oldest is dropped), or the sidecar stopped before the sink took them.",
		}),
		shipped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "countersign_decision_logs_shipped_total",
			Help: "Decision-log events the --decision-log-url sink took (a 2xx to their batch).",
		}),
		wake: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	if o.Registerer != nil {
		for _, c := range []prometheus.Collector{s.dropped, s.shipped} {
			if err := o.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("decisionship: register metric: %w", err)
			}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go s.run(ctx)
	return s, nil
}

// Ship adds e to the buffer and returns at once. A full buffer drops its
// oldest event to make room; after Close, e itself is dropped.
func (s *Shipper) Ship(e Event) {
	e.Labels = s.o.Labels
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		s.drop(1, "the shipper is closed")
		return
	}
	if len(s.buf) == s.o.BufferSize {
		s.buf[0] = Event{} // let the dropped input be collected
		s.buf = s.buf[1:]
		s.drop(1, "the buffer is full: the sink is down or slower than decisions are made")
	} else {
		s.full = false
	}
	s.buf = append(s.buf, e)
	if len(s.buf) >= s.o.BatchSize {
		s.signal()
	}
}

// drop counts n dropped events and warns once per filling of the buffer.
// The caller holds mu.
func (s *Shipper) drop(n int, why string) {
	s.dropped.Add(float64(n))
	if !s.full {
		s.full = true
		s.log.Warn("decision-log events dropped", "events", n, "why", why, "buffer", s.o.BufferSize)
	}
}

// signal wakes the sender without waiting.
func (s *Shipper) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Close stops taking events and sends those waiting until ctx ends; what
// is left then is dropped, counted and logged. It is safe to call more
// than once.
func (s *Shipper) Close(ctx context.Context) error {
	s.once.Do(func() {
		s.mu.Lock()
		s.closing = true
		s.mu.Unlock()
		close(s.stop)
	})
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		s.cancel()
		<-s.done
		return ctx.Err()
	}
}

// run sends what waits, in batches, each time a batch fills or FlushEvery
// passes, until Close; then it sends what is left and ends.
func (s *Shipper) run(ctx context.Context) {
	defer close(s.done)
	defer s.cancel()
	timer := time.NewTimer(s.o.FlushEvery)
	defer timer.Stop()
	stopping := false
	for {
		if !stopping {
			select {
			case <-s.wake:
			case <-timer.C:
			case <-s.stop:
				stopping = true
			}
		}
		for {
			batch := s.take()
			if batch == nil {
				break
			}
			if !s.send(ctx, batch) {
				s.mu.Lock()
				s.full = false // the loss is logged below, whatever the buffer logged before
				n := len(s.buf)
				s.buf = nil
				s.mu.Unlock()
				s.dropped.Add(float64(len(batch) + n))
				s.log.Warn("decision-log events dropped: the sidecar stopped before the sink took them", "events", len(batch)+n)
				return
			}
		}
		if stopping {
			return
		}
		timer.Reset(s.o.FlushEvery)
	}
}

// take removes the next batch from the buffer: up to BatchSize events,
// oldest first, nil when none wait.
func (s *Shipper) take() []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := min(len(s.buf), s.o.BatchSize)
	if n == 0 {
		return nil
	}
	batch := make([]Event, n)
	copy(batch, s.buf)
	clear(s.buf[:n])
	s.buf = s.buf[n:]
	return batch
}

// send posts batch until the sink takes it, backing off between attempts;
// false when ctx ended first.
func (s *Shipper) send(ctx context.Context, batch []Event) bool {
	body, err := encode(batch)
	if err != nil {
		// Events are built from decoded JSON: this cannot happen short
		// of a bug, and retrying would not help.
		s.log.Error("decision-log batch skipped", "events", len(batch), "err", err)
		return true
	}
	wait := s.o.FirstBackoff
	for attempt := 1; ; attempt++ {
		err := s.post(ctx, body)
		if err == nil {
			s.shipped.Add(float64(len(batch)))
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		s.log.Warn("decision-log batch not taken; sending it again", "events", len(batch), "attempt", attempt, "in", wait.String(), "err", err)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return false
		}
		wait = min(2*wait, s.o.MaxBackoff)
	}
}

// encode is batch as a gzip-compressed JSON array.
func encode(batch []Event) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if err := json.NewEncoder(zw).Encode(batch); err != nil {
		return nil, fmt.Errorf("encode decision-log batch: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("compress decision-log batch: %w", err)
	}
	return buf.Bytes(), nil
}

// post makes one attempt. Every non-2xx answer is a failure to retry: a
// sink that refuses a well-formed batch is misconfigured, and the events
// wait (or are dropped oldest first) until it is fixed, as in OPA.
func (s *Shipper) post(ctx context.Context, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.o.URL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("make the request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Content-Encoding", "gzip")
	req.Header.Set("User-Agent", "countersign-decisionship")
	res, err := s.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // its message repeats the URL, which may hold a credential
		}
		return fmt.Errorf("post: %w", err)
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10)) // so the connection is reused
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return fmt.Errorf("the sink answered %d", res.StatusCode)
	}
	return nil
}
