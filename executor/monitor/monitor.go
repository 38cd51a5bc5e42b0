// Package monitor watches countersign's own records for two signs of an
// incident and raises an alert (a log line, a metric and, through the
// caller's Record, an audit record) once: what was alerted is kept in the
// store, in the transaction that records the alert, so several sidecars
// watching one store, or one restarted, do not raise it again:
//
//   - the invariant, written at the effect rather than at the
//     configuration: a refund above its auto limit executed without a used
//     approval;
//   - the process shape: requests that should need an approval keep coming
//     while approvals requested fall to zero, which shows a policy change
//     that removed the approval step even before a violating refund runs.
//
// A refund's auto limit is never the active bundle's. It is that of the
// bundle whose decision let it run (release.Limits), so a refund a
// since-rolled-back bundle allowed within its own limit raises nothing
// after the rollback; but only when the gate vouched for that bundle (it
// went live through the gate, never by breaking the glass). Otherwise, or
// when that bundle cannot be found, the refund is held to the stricter of
// the monitor's own limit (Options.AutoLimit, the designed $50.00) and the
// strictest known, and the violation says why: a misconfigured bundle
// released without the gate cannot silence the monitor.
package monitor

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/countersign/countersign/executor/clock"
	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/release"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

// Alert kinds.
const (
	KindInvariant    = "refund_over_limit_without_approval"
	KindProcessShape = "approvals_stopped"
)

// Kinds lists every alert kind, so that countersign_alerts_total shows
// each at zero before the first alert: operators alert on its increase.
func Kinds() []string { return []string{KindInvariant, KindProcessShape} }

// Alert is one thing a person must look at now.
type Alert struct {
	At      time.Time `json:"at"`
	Kind    string    `json:"kind"`
	Message string    `json:"message"`
	// Steps are the violating refunds (invariant alerts).
	Steps []Violation `json:"steps,omitempty"`
}

// Violation is one refund that broke the invariant.
type Violation struct {
	Workflow string      `json:"workflow"`
	N        int         `json:"n"`
	Rep      string      `json:"rep"`
	Order    string      `json:"order"`
	Amount   money.Cents `json:"amount"`
	At       time.Time   `json:"at"`
	// Limit is the auto limit the refund was held to: that of the bundle
	// whose decision let it run (Revision), or, when Note says why that
	// one's own cannot be used, the strictest known.
	Limit    money.Cents `json:"limit"`
	Revision string      `json:"revision,omitempty"`
	Note     string      `json:"note,omitempty"`
}

// Options configure a Monitor. Store is required.
type Options struct {
	Store *store.DB
	// Clock is the "now" of the windows the monitors look back over. Nil
	// means the wall clock.
	Clock clock.Clock
	// AutoLimit is the designed auto limit, which a refund is held to when
	// the bundle that decided it cannot vouch for a limit of its own.
	// Default 5000 cents.
	AutoLimit money.Cents
	// Window is the process-shape window. Default one hour.
	Window time.Duration
	// MinRequests is how many above-limit requests with no approval
	// requested make the process-shape alert. Default 3.
	MinRequests int
	Logger      *slog.Logger
	// Registerer gets countersign_alerts_total. Optional.
	Registerer prometheus.Registerer
	// Record keeps every alert (the audit), in the transaction that marks
	// it alerted. Optional.
	Record func(*store.Tx, Alert) error
}

// Monitor checks the records when asked; the caller decides how often.
type Monitor struct {
	o      Options
	alerts *prometheus.CounterVec
	limits *release.Limits
}

// shapeKey marks the process-shape alert standing in the store.
const shapeKey = "approvals_stopped"

// violationKey marks a violating step alerted in the store.
func violationKey(v Violation) string { return fmt.Sprintf("refund/%s/%d", v.Workflow, v.N) }

// New returns a Monitor.
func New(o Options) (*Monitor, error) {
	if o.Clock == nil {
		o.Clock = clock.Wall{}
	}
	if o.AutoLimit == 0 {
		o.AutoLimit = 5000
	}
	if o.Window == 0 {
		o.Window = time.Hour
	}
	if o.MinRequests == 0 {
		o.MinRequests = 3
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.Logger = o.Logger.With("component", "monitor")
	m := &Monitor{o: o, limits: release.NewLimits(), alerts: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "countersign_alerts_total", Help: "Alerts raised by the monitors, by kind.",
	}, []string{"kind"})}
	for _, kind := range Kinds() {
		m.alerts.WithLabelValues(kind) // present at zero from the start
	}
	if o.Registerer != nil {
		if err := o.Registerer.Register(m.alerts); err != nil {
			return nil, fmt.Errorf("monitor: register metric: %w", err)
		}
	}
	return m, nil
}

// Check looks at the records once and returns the new alerts.
func (m *Monitor) Check(ctx context.Context) ([]Alert, error) {
	now := m.o.Clock.Now()
	var seen observation
	err := m.o.Store.View(func(tx *store.Tx) (err error) { seen, err = m.observe(tx, now); return err })
	if err != nil {
		return nil, fmt.Errorf("monitor: %w", err)
	}
	violations, aboveLimit := seen.violations, seen.aboveLimit
	shaped := aboveLimit >= m.o.MinRequests && seen.approvalsAsked == 0
	if len(violations) == 0 && shaped == seen.standing {
		return nil, nil // nothing new: no write
	}
	var alerts []Alert
	// Raise what no watcher of the store has raised yet, and record it in
	// the same transaction: of two sidecars checking at once, one does.
	err = m.o.Store.Update(func(tx *store.Tx) error {
		alerts = nil // this may run more than once
		var fresh []Violation
		var total money.Cents
		for _, v := range violations {
			if !tx.Alerted(violationKey(v)) {
				fresh = append(fresh, v)
				total += v.Amount
			}
		}
		if len(fresh) > 0 {
			alerts = append(alerts, Alert{At: now, Kind: KindInvariant, Steps: fresh, Message: fmt.Sprintf(
				"%d refund(s) above %s executed without a used approval, %s in all: contain (switch issue_refund off, raise the credential epoch) and review the worklist",
				len(fresh), limitsOf(fresh), total)})
		}
		switch standing := tx.Alerted(shapeKey); {
		case shaped && !standing:
			alerts = append(alerts, Alert{At: now, Kind: KindProcessShape, Message: fmt.Sprintf(
				"no approval requested in the last %s while %d refund(s) were allowed above the auto limit of the bundle that decided them: check the active bundle",
				m.o.Window, aboveLimit)})
		case !shaped && standing:
			if err := tx.ClearAlerted(shapeKey); err != nil {
				return err
			}
		}
		return m.mark(tx, alerts)
	})
	if err != nil {
		return nil, fmt.Errorf("monitor: record alerts: %w", err)
	}
	for _, a := range alerts {
		m.alerts.WithLabelValues(a.Kind).Inc()
		m.o.Logger.Warn("alert", "kind", a.Kind, "message", a.Message)
	}
	return alerts, nil
}

// observation is what one look at the records saw.
type observation struct {
	violations []Violation
	// aboveLimit and approvalsAsked count, over the window, the refunds
	// allowed above their limit and the approvals requested for refunds.
	aboveLimit, approvalsAsked int
	// standing is the process-shape alert, as last raised or cleared.
	standing bool
}

// observe reads, in tx, the violations not alerted yet and the process
// shape over the window before now, each refund judged by the limits of
// the bundle that decided it.
func (m *Monitor) observe(tx *store.Tx, now time.Time) (observation, error) {
	o := observation{standing: tx.Alerted(shapeKey)}
	book, err := m.limits.Read(tx)
	if err != nil {
		return o, err
	}
	if o.violations, err = m.violations(tx, book); err != nil {
		return o, err
	}
	o.aboveLimit, o.approvalsAsked, err = m.shape(tx, book, now)
	return o, err
}

// violations lists the refunds done above the auto limit they are held
// to (book) without a used approval, and not alerted yet. The decision
// log is read only for a refund above every limit known.
func (m *Monitor) violations(tx *store.Tx, book *release.Book) ([]Violation, error) {
	var out []Violation
	floor := min(book.Strictest(), m.o.AutoLimit)
	users := map[string]string{}
	err := tx.AllSteps(func(s store.Step) error {
		if s.Tool != tool.IssueRefund || s.Status != store.StepDone || s.Args.Amount <= floor {
			return nil
		}
		if s.Approval != "" {
			if a, err := tx.Approval(s.Approval); err == nil && a.Status == store.ApprovalUsed {
				return nil
			}
		}
		if tx.Alerted(violationKey(Violation{Workflow: s.Workflow, N: s.N})) {
			return nil
		}
		held, err := book.Step(tx, s.Workflow, s.N)
		if err != nil {
			return err
		}
		limit := held.Limit(m.o.AutoLimit)
		if s.Args.Amount <= limit {
			return nil
		}
		if _, ok := users[s.Workflow]; !ok {
			w, _ := tx.Workflow(s.Workflow)
			users[s.Workflow] = w.User
		}
		out = append(out, Violation{Workflow: s.Workflow, N: s.N, Rep: users[s.Workflow], Order: s.Args.Order,
			Amount: s.Args.Amount, At: s.Finished, Limit: limit, Revision: held.Revision, Note: held.Fallback})
		return nil
	})
	return out, err
}

// shape counts, over the window before now, the refunds allowed above the
// auto limit of the bundle that allowed them (book) and the approvals
// requested for refunds.
func (m *Monitor) shape(tx *store.Tx, book *release.Book, now time.Time) (aboveLimit, approvalsAsked int, err error) {
	err = tx.DecisionsSince(now.Add(-m.o.Window), func(d store.Decision) error {
		switch {
		case d.Tool != tool.IssueRefund:
		case d.Decision == "REQUIRE_APPROVAL":
			approvalsAsked++
		case d.Decision == "ALLOW" && d.Args.Amount > book.Of(d.Digest).Limit(m.o.AutoLimit):
			aboveLimit++
		}
		return nil
	})
	return aboveLimit, approvalsAsked, err
}

// limitsOf names the limit violations were held to: the amount when they
// share one, else how each was judged.
func limitsOf(vs []Violation) string {
	for _, v := range vs[1:] {
		if v.Limit != vs[0].Limit {
			return "the auto limit of the bundle that decided each"
		}
	}
	return vs[0].Limit.String()
}

// mark marks alerts alerted in tx and records them.
func (m *Monitor) mark(tx *store.Tx, alerts []Alert) error {
	for _, a := range alerts {
		keys := []string{shapeKey}
		if a.Kind == KindInvariant {
			keys = keys[:0]
			for _, v := range a.Steps {
				keys = append(keys, violationKey(v))
			}
		}
		for _, k := range keys {
			if err := tx.MarkAlerted(k); err != nil {
				return err
			}
		}
		if m.o.Record != nil {
			if err := m.o.Record(tx, a); err != nil {
				return err
			}
		}
	}
	return nil
}

// Run checks every interval until ctx ends.
func (m *Monitor) Run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := m.Check(ctx); err != nil {
				m.o.Logger.Error("monitor check failed", "err", err)
			}
		}
	}
}
