package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/countersign/countersign/executor/clock"
	"github.com/countersign/countersign/executor/store"
)

// Defaults of Options.
const (
	DefaultQueueSize      = 1024
	DefaultAttempts       = 5
	DefaultFirstBackoff   = time.Second
	DefaultAttemptTimeout = 10 * time.Second
)

// Options configure a Notifier. URL, Secret and PublicURL are required.
type Options struct {
	// URL is the webhook: every notice is POSTed to it. It is not logged,
	// since chat webhooks carry their credential in the URL.
	URL string
	// Secret keys the HMAC of the signature (Header).
	Secret []byte
	// PublicURL is the base URL at which leads reach the sidecar; a
	// notice links to PublicURL/approvals#approval-<id>.
	PublicURL string
	// QueueSize bounds the notices waiting to be sent; past it, a notice
	// is dropped, counted and logged. Default DefaultQueueSize.
	QueueSize int
	// Attempts bounds the posts of one notice. Default DefaultAttempts.
	Attempts int
	// FirstBackoff is the wait before the second attempt; each later
	// wait doubles it. Default DefaultFirstBackoff.
	FirstBackoff time.Duration
	// AttemptTimeout bounds each post. Default DefaultAttemptTimeout.
	AttemptTimeout time.Duration
	// Clock stamps the signatures. Default the wall clock.
	Clock  clock.Clock
	Logger *slog.Logger
	// Registerer gets countersign_notices_total. Optional.
	Registerer prometheus.Registerer
}

// Validate reports every problem of o at once.
func (o Options) Validate() error {
	var errs []error
	if u, err := url.Parse(o.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		// The URL itself is not repeated: it may hold a credential.
		errs = append(errs, errors.New("the webhook URL must be an absolute http(s) URL"))
	}
	if len(o.Secret) == 0 {
		errs = append(errs, fmt.Errorf("%w: every notice is signed with it", ErrNoSecret))
	}
	if u, err := url.Parse(o.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("the public URL %q must be the http(s) base URL leads reach the sidecar at", o.PublicURL))
	}
	if o.QueueSize < 0 || o.Attempts < 0 || o.FirstBackoff < 0 || o.AttemptTimeout < 0 {
		errs = append(errs, errors.New("QueueSize, Attempts, FirstBackoff and AttemptTimeout must not be negative"))
	}
	if len(errs) > 0 {
		return fmt.Errorf("notify: invalid options: %w", errors.Join(errs...))
	}
	return nil
}

func (o Options) withDefaults() Options {
	if o.QueueSize == 0 {
		o.QueueSize = DefaultQueueSize
	}
	if o.Attempts == 0 {
		o.Attempts = DefaultAttempts
	}
	if o.FirstBackoff == 0 {
		o.FirstBackoff = DefaultFirstBackoff
	}
	if o.AttemptTimeout == 0 {
		o.AttemptTimeout = DefaultAttemptTimeout
	}
	if o.Clock == nil {
		o.Clock = clock.Wall{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.PublicURL = strings.TrimSuffix(o.PublicURL, "/")
	return o
}

// ReadSecretFile reads the webhook secret from path: the file's content,
// without the white space around it (the newline an editor or echo adds).
// An empty file is ErrNoSecret.
func ReadSecretFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return nil, fmt.Errorf("%s is empty: %w", path, ErrNoSecret)
	}
	return b, nil
}

// The outcomes countersign_notices_total counts.
const (
	outcomeSent    = "sent"
	outcomeFailed  = "failed"
	outcomeDropped = "dropped"
)

// Notifier posts approval notices from a bounded queue, on one goroutine
// of its own. It implements engine.Notifier.
type Notifier struct {
	o       Options
	log     *slog.Logger
	client  *http.Client
	queue   chan store.Approval
	notices *prometheus.CounterVec
	// closing refuses new notices (mu orders it with the queueing, so
	// nothing is queued after the sender's last look); stop tells the
	// sender to empty the queue and end; cancel cuts short what it is
	// sending; done is closed when it has ended.
	mu        sync.RWMutex
	closing   bool
	stop      chan struct{}
	cancel    context.CancelFunc
	done      chan struct{}
	closeOnce sync.Once
}

// New checks o and starts the sender; Close stops it.
func New(o Options) (*Notifier, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	o = o.withDefaults()
	n := &Notifier{
		o: o, log: o.Logger.With("component", "notify"),
		client: &http.Client{
			Timeout: o.AttemptTimeout,
			// A redirect would turn the POST into a GET; the operator
			// should configure the final URL instead.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		queue: make(chan store.Approval, o.QueueSize),
		notices: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "countersign_notices_total",
			Help: "Approval notices to the webhook by outcome: sent, failed (every attempt failed, or the receiver refused it), dropped (the queue was full, or the sidecar stopped before sending).",
		}, []string{"outcome"}),
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	for _, outcome := range []string{outcomeSent, outcomeFailed, outcomeDropped} {
		n.notices.WithLabelValues(outcome) // present at zero from the start
	}
	if o.Registerer != nil {
		if err := o.Registerer.Register(n.notices); err != nil {
			return nil, fmt.Errorf("notify: register metric: %w", err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	go n.run(ctx)
	return n, nil
}

// ApprovalChanged queues the notice of a's change and returns at once: a
// full queue drops it (counted and logged), never waits.
func (n *Notifier) ApprovalChanged(a store.Approval) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	if n.closing {
		n.dropped(a, "the notifier is closed")
		return
	}
	select {
	case n.queue <- a:
	default:
		n.dropped(a, "the queue is full: the webhook is slower than approvals change")
	}
}

func (n *Notifier) dropped(a store.Approval, why string) {
	n.notices.WithLabelValues(outcomeDropped).Inc()
	n.log.Warn("approval notice dropped", "approval", a.ID, "status", a.Status, "why", why)
}

// Close stops taking notices and sends those queued until ctx ends; what
// is left then is dropped. It is safe to call more than once.
func (n *Notifier) Close(ctx context.Context) error {
	n.closeOnce.Do(func() {
		n.mu.Lock()
		n.closing = true
		n.mu.Unlock()
		close(n.stop)
	})
	select {
	case <-n.done:
		return nil
	case <-ctx.Done():
		n.cancel()
		<-n.done
		return ctx.Err()
	}
}

// run sends the queued notices one at a time, in the order they were
// queued, until Close; then it sends what is left and ends.
func (n *Notifier) run(ctx context.Context) {
	defer close(n.done)
	defer n.cancel()
	for {
		select {
		case a := <-n.queue:
			n.send(ctx, a)
		case <-n.stop:
			for {
				select {
				case a := <-n.queue:
					n.send(ctx, a)
				default:
					return
				}
			}
		}
	}
}

// send posts a's notice, again after a network error, a 429 or a 5xx, up
// to o.Attempts times, waiting FirstBackoff, then twice as long each time.
// A receiver's other answers are final.
func (n *Notifier) send(ctx context.Context, a store.Approval) {
	notice, ok := newNotice(a, n.o.PublicURL+"/approvals#approval-"+url.PathEscape(a.ID))
	if !ok {
		n.log.Error("approval notice skipped: a status without an event", "approval", a.ID, "status", a.Status)
		return
	}
	body, err := json.Marshal(notice)
	if err != nil {
		n.log.Error("approval notice skipped", "approval", a.ID, "err", err)
		return
	}
	log := n.log.With("approval", a.ID, "event", notice.Event)
	wait := n.o.FirstBackoff
	for attempt := 1; ; attempt++ {
		err := n.post(ctx, body)
		var final *finalError
		switch {
		case err == nil:
			n.notices.WithLabelValues(outcomeSent).Inc()
			log.Debug("approval notice sent", "attempt", attempt)
			return
		case ctx.Err() != nil:
			n.dropped(a, "the sidecar stopped before it was sent")
			return
		case errors.As(err, &final) || attempt >= n.o.Attempts:
			n.notices.WithLabelValues(outcomeFailed).Inc()
			log.Warn("approval notice failed", "attempts", attempt, "err", err)
			return
		}
		log.Info("approval notice not delivered; trying again", "attempt", attempt, "in", wait, "err", err)
		select {
		case <-time.After(wait):
		case <-ctx.Done(): // the next post fails at once, and the notice is dropped
		}
		wait *= 2
	}
}

// finalError is a failure that another attempt would not change: a
// receiver's 3xx or 4xx other than 429, or a request that cannot be made.
type finalError struct{ msg string }

func (e *finalError) Error() string { return e.msg }

// answered is the error of a receiver's answer status, nil for a 2xx.
func answered(status int) error {
	switch {
	case status >= 200 && status < 300:
		return nil
	case status == http.StatusTooManyRequests || status >= 500:
		return fmt.Errorf("the webhook answered %d", status)
	case status >= 300 && status < 400:
		return &finalError{fmt.Sprintf("the webhook answered %d, a redirect: configure the URL it redirects to", status)}
	default:
		return &finalError{fmt.Sprintf("the webhook refused the notice with %d: check the URL and the receiver's secret", status)}
	}
}

// post makes one attempt, signed at the time it is made.
func (n *Notifier) post(ctx context.Context, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.o.URL, bytes.NewReader(body))
	if err != nil {
		return &finalError{"cannot make the request: " + err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "countersign-notify")
	req.Header.Set(Header, Sign(n.o.Secret, n.o.Clock.Now(), body))
	res, err := n.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // its message repeats the URL, which may hold a credential
		}
		return fmt.Errorf("post: %w", err)
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10)) // so the connection is reused
	return answered(res.StatusCode)
}
