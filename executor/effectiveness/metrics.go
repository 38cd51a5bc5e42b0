package effectiveness

import (
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/countersign/countersign/executor/clock"
	"github.com/countersign/countersign/executor/store"
)

// MetricsMaxAge is how long a computed report answers scrapes: a report
// reads the whole store, so scrapes every few seconds must not each pay it.
const MetricsMaxAge = 15 * time.Second

// Collector serves the report over all time as Prometheus gauges, labelled
// by tool and agent version (and rule, outcome or state where a figure has
// parts).
type Collector struct {
	db    *store.DB
	clock clock.Clock
	log   *slog.Logger

	mu     sync.Mutex
	report Report
	at     time.Time
}

// NewCollector returns a Collector over db. A nil clock is the wall clock,
// a nil logger discards.
func NewCollector(db *store.DB, c clock.Clock, log *slog.Logger) *Collector {
	if c == nil {
		c = clock.Wall{}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Collector{db: db, clock: c, log: log}
}

var (
	labels = []string{"tool", "agent_version"}
	descs  = map[string]*prometheus.Desc{}
	gauge  = func(name, help string, extra ...string) *prometheus.Desc {
		d := prometheus.NewDesc("countersign_effectiveness_"+name, help, append(append([]string{}, labels...), extra...), nil)
		descs[name] = d
		return d
	}
	proposalsDesc  = gauge("proposals", "Calls proposed (steps admitted plus schema rejections).")
	rejectionsDesc = gauge("schema_rejections", "Proposals the tool's schema refused.")
	denialsDesc    = gauge("denials", "Policy denials by rule (shadow decisions excluded).", "rule")
	shadowedDesc   = gauge("shadowed", "Steps decided in shadow mode.")
	approvalsDesc  = gauge("approvals", "Approval requests by outcome (requested, approved, rejected, expired, pending).", "outcome")
	overturnDesc   = gauge("overturn_rate", "Rejected / (approved + rejected) approval requests.")
	waitDesc       = gauge("approval_p50_seconds", "Median seconds from an approval request to its approval.")
	duplicatesDesc = gauge("duplicates_suppressed", "Steps that repeated a call of their workflow, not dispatched.")
	unknownDesc    = gauge("unknown_outcomes", "Steps whose outcome was unknown, by state (open, resolved_by_lookup).", "state")
	compensateDesc = gauge("compensations", "Steps reversed and refunds ratified after the fact.")
)

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range descs {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	r, ok := c.current()
	if !ok {
		return
	}
	g := func(d *prometheus.Desc, v float64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, lv...)
	}
	for _, row := range r.Rows {
		l := []string{row.Tool, row.AgentVersion}
		g(proposalsDesc, float64(row.Proposals), l...)
		g(rejectionsDesc, float64(row.SchemaRejections), l...)
		for rule, n := range row.Denials {
			g(denialsDesc, float64(n), append(l, rule)...)
		}
		g(shadowedDesc, float64(row.Shadowed), l...)
		a := row.Approvals
		for outcome, n := range map[string]int{"requested": a.Requested, "approved": a.Approved, "rejected": a.Rejected, "expired": a.Expired, "pending": a.Pending} {
			g(approvalsDesc, float64(n), append(l, outcome)...)
		}
		g(overturnDesc, a.OverturnRate, l...)
		g(waitDesc, a.P50SecondsToApproval, l...)
		g(duplicatesDesc, float64(row.DuplicatesSuppressed), l...)
		g(unknownDesc, float64(row.Unknown.Open), append(l, "open")...)
		g(unknownDesc, float64(row.Unknown.ResolvedByLookup), append(l, "resolved_by_lookup")...)
		g(compensateDesc, float64(row.Compensations), l...)
	}
}

// current returns the report over all time, computed at most MetricsMaxAge
// ago.
func (c *Collector) current() (Report, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	if !c.at.IsZero() && now.Sub(c.at) < MetricsMaxAge {
		return c.report, true
	}
	r, err := Compute(c.db, time.Time{}, now)
	if err != nil {
		c.log.Error("effectiveness metrics: could not read the records", "err", err)
		return c.report, !c.at.IsZero()
	}
	c.report, c.at = r, now
	return r, true
}
