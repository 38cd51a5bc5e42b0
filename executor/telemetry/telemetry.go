// Package telemetry turns what the engine records into Prometheus metrics:
// decisions by outcome and rule, step latency, approvals by status and
// dispatch errors by class, breaker trips by tool and agent version. It
// implements engine.Observer. The series operators alert on exist at zero
// before the first event; ActiveBundle names the policy bundle in force.
package telemetry

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

// Metrics holds the collectors. Register them once with a registry.
type Metrics struct {
	decisions *prometheus.CounterVec
	steps     *prometheus.HistogramVec
	approvals *prometheus.CounterVec
	dispatch  *prometheus.CounterVec
	trips     *prometheus.CounterVec
}

// New creates the collectors and registers them with reg.
func New(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "countersign_decisions_total",
			Help: "Policy decisions by outcome, the rule that made them and the agent version that proposed (\"\" when the agent declared none).",
		}, []string{"decision", "rule", "agent_version"}),
		steps: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "countersign_step_duration_seconds",
			Help:    "Time to drive a step as far as it could go, by tool and resulting status.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}, []string{"tool", "status"}),
		approvals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "countersign_approvals_total",
			Help: "Approval records entering each status.",
		}, []string{"status"}),
		dispatch: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "countersign_dispatch_errors_total",
			Help: "Dispatch errors by tool and class (refused, outcome_unknown, transient, reversal).",
		}, []string{"tool", "class"}),
		trips: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "countersign_breaker_trips_total",
			Help: "Circuit breaker trips (a tool put in approval_only for one agent version) by tool and agent version.",
		}, []string{"tool", "agent_version"}),
	}
	m.startAtZero()
	for _, c := range []prometheus.Collector{m.decisions, m.steps, m.approvals, m.dispatch, m.trips} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// startAtZero makes the dispatch errors of every tool of the catalog and
// every class exist at zero before the first error, so that an alert on
// their increase fires on the first one, which a series born at 1 would
// not show. Breaker trips are by agent version, which is not known in
// advance (an agent without one has no breaker): Decided starts them.
func (m *Metrics) startAtZero() {
	for _, spec := range tool.All() {
		for _, class := range engine.DispatchClasses() {
			m.dispatch.WithLabelValues(string(spec.Name), class)
		}
	}
}

// KnownVersions starts at zero, for every tool, the breaker trips of each
// agent version db has a breaker for (one that has failed at least once),
// so that after a restart a version's next trip shows as an increase.
func (m *Metrics) KnownVersions(db *store.DB) error {
	versions := map[string]bool{}
	err := db.View(func(tx *store.Tx) error {
		for _, spec := range tool.All() {
			bs, err := tx.Breakers(string(spec.Name))
			if err != nil {
				return err
			}
			for _, b := range bs {
				versions[b.AgentVersion] = true
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("telemetry: read the breakers: %w", err)
	}
	for v := range versions {
		m.startTrips(v)
	}
	return nil
}

// startTrips starts the breaker trips of version at zero for every tool.
func (m *Metrics) startTrips(version string) {
	for _, spec := range tool.All() {
		m.trips.WithLabelValues(string(spec.Name), version)
	}
}

// Decided counts a decision, and starts the breaker trips of its agent
// version at zero for every tool: a version decides before its breaker
// can trip, so the first trip shows as an increase.
func (m *Metrics) Decided(d store.Decision) {
	m.decisions.WithLabelValues(d.Decision, d.Rule, d.AgentVersion).Inc()
	if d.AgentVersion != "" {
		m.startTrips(d.AgentVersion)
	}
}

// StepFinished observes how long a step took to reach its status.
func (m *Metrics) StepFinished(s store.Step, took time.Duration) {
	m.steps.WithLabelValues(string(s.Tool), string(s.Status)).Observe(took.Seconds())
}

// ApprovalChanged counts an approval entering its status.
func (m *Metrics) ApprovalChanged(a store.Approval) {
	m.approvals.WithLabelValues(string(a.Status)).Inc()
}

// DispatchFailed counts a failed dispatch.
func (m *Metrics) DispatchFailed(t tool.Name, class string) {
	m.dispatch.WithLabelValues(string(t), class).Inc()
}

// BreakerTripped counts a trip of the breaker of a tool for an agent
// version.
func (m *Metrics) BreakerTripped(b store.Breaker) {
	m.trips.WithLabelValues(b.Tool, b.AgentVersion).Inc()
}
