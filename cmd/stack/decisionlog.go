package stack

import (
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/countersign/countersign/executor/buildinfo"
	"github.com/countersign/countersign/executor/decisionship"
	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/telemetry"
)

// DecisionLogDrain is how long a stopping sidecar goes on shipping the
// decision-log events still buffered; what is left then is dropped
// (counted).
const DecisionLogDrain = 5 * time.Second

// newShipper ships every decision to o.DecisionLogURL in OPA's
// decision-log format, labelled with a fresh id for this process (as
// OPA's instance id) and the build's version; nil without a URL.
func newShipper(o Options, reg prometheus.Registerer) (*decisionship.Shipper, error) {
	if o.DecisionLogURL == "" {
		return nil, nil
	}
	return decisionship.New(decisionship.Options{URL: o.DecisionLogURL, Logger: o.Logger, Registerer: reg,
		Labels: decisionship.Labels{App: "countersign", ID: ulid.Make().String(), Version: buildinfo.Read().Version}})
}

// shippingObserver is the metrics' observer that also ships each decision
// once it has committed.
type shippingObserver struct {
	*telemetry.Metrics
	ship *decisionship.Shipper
}

var _ engine.Observer = shippingObserver{}

func (s shippingObserver) Decided(d store.Decision) {
	s.Metrics.Decided(d)
	s.ship.Ship(newEvent(engine.NewLogEntry(d)))
}

// newEvent is a decision as OPA's decision log writes an event.
func newEvent(e engine.LogEntry) decisionship.Event {
	return decisionship.Event{DecisionID: e.DecisionID, Path: e.Path, Input: e.Input,
		Result:      decisionship.Result{Decision: e.Result.Decision, Rule: e.Result.Rule},
		Bundles:     map[string]decisionship.Bundle{"countersign": {Revision: e.Bundles.Countersign.Revision, Digest: e.Bundles.Countersign.Digest}},
		RequestedBy: e.User, Timestamp: e.Timestamp}
}
