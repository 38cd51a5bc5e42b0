package telemetry

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/countersign/countersign/executor/policy"
)

// Policy is what the active-bundle gauge reads: the policy engine.
type Policy interface {
	Active() *policy.Bundle
}

var _ Policy = (*policy.Engine)(nil)

var activeBundleDesc = prometheus.NewDesc("countersign_active_bundle",
	"1 for the policy bundle this sidecar decides with, by revision and digest; no series before the first activation.",
	[]string{"revision", "digest"}, nil)

// ActiveBundle is countersign_active_bundle, read from p at each scrape:
// whatever made the bundle active (an upload, an approval, a rollback, a
// restart, or following another sidecar of the fleet), the page names it
// alone, with no stale series of the bundle before it to remove.
type ActiveBundle struct{ p Policy }

var _ prometheus.Collector = ActiveBundle{}

// NewActiveBundle returns the gauge over p.
func NewActiveBundle(p Policy) ActiveBundle { return ActiveBundle{p: p} }

// Describe implements prometheus.Collector.
func (a ActiveBundle) Describe(ch chan<- *prometheus.Desc) { ch <- activeBundleDesc }

// Collect implements prometheus.Collector.
func (a ActiveBundle) Collect(ch chan<- prometheus.Metric) {
	b := a.p.Active()
	if b == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(activeBundleDesc, prometheus.GaugeValue, 1, b.Revision(), b.Digest())
}
