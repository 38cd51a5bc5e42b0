// Package telemetry turns what the engine records into Prometheus metrics:
// decisions by outcome and rule, step latency, approvals by status and
// dispatch errors by class, breaker trips by tool and agent version. It
// implements engine.Observer.
package telemetry

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

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
			Help: "Dispatch errors by tool and class (refused, outcome_unknown, transient).",
		}, []string{"tool", "class"}),
		trips: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "countersign_breaker_trips_total",
			Help: "Circuit breaker trips (a tool put in approval_only for one agent version) by tool and agent version.",
		}, []string{"tool", "agent_version"}),
	}
	for _, c := range []prometheus.Collector{m.decisions, m.steps, m.approvals, m.dispatch, m.trips} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Decided counts a decision.
func (m *Metrics) Decided(d store.Decision) {
	m.decisions.WithLabelValues(d.Decision, d.Rule, d.AgentVersion).Inc()
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
