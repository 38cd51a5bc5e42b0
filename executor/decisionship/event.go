package decisionship

import (
	"encoding/json"
	"time"
)

// Event is one decision in OPA's decision-log event shape.
type Event struct {
	Labels     Labels `json:"labels"`
	DecisionID string `json:"decision_id"`
	Path       string `json:"path"`
	// Input is the input document the policy evaluated.
	Input json.RawMessage `json:"input,omitempty"`
	// Result is the policy's result: {"decision", "rule"} for the call
	// policy.
	Result  Result            `json:"result"`
	Bundles map[string]Bundle `json:"bundles"`
	// RequestedBy is the person the call was decided for (see the package
	// documentation for why not an address).
	RequestedBy string    `json:"requested_by"`
	Timestamp   time.Time `json:"timestamp"`
}

// Labels identify the sidecar that decided, as OPA's labels identify an
// OPA instance.
type Labels struct {
	App     string `json:"app"`
	ID      string `json:"id"`
	Version string `json:"version"`
}

// Result is the call policy's result object.
type Result struct {
	Decision string `json:"decision"`
	Rule     string `json:"rule"`
}

// Bundle names the bundle that answered.
type Bundle struct {
	Revision string `json:"revision"`
	Digest   string `json:"digest,omitempty"`
}
