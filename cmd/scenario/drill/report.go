package drill

import (
	"time"

	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/reconcile"
)

// Report is what a drill found. Every figure in it is a count, an amount, a
// simulated time or a sequential id, so the same seed gives the same report.
type Report struct {
	Seed    uint64  `json:"seed"`
	Traffic Traffic `json:"traffic"`
	// Gate is the gate's verdict on p1, p2 and p3 as shipped, and what the
	// drill's copies (caps raised) fail besides.
	Gate []GateVerdict `json:"gate"`
	// Timeline lists what happened, in order, in minutes after the release
	// of p2. An event that never happened is absent.
	Timeline []Event `json:"timeline"`
	// Alerts are every alert the monitor raised.
	Alerts      []Alert        `json:"alerts"`
	Paused      Paused         `json:"paused_at_fix"`
	Policies    []PolicyRow    `json:"policies"`
	Worklist    Worklist       `json:"worklist"`
	Remediation Remediation    `json:"remediation"`
	After       Reconciliation `json:"reconciliation_after_remediation"`
	SinceFix    SinceFix       `json:"since_fix"`
	// Bounds are the 95% upper bounds on the violation rate with zero
	// violations observed in n approval-gated refunds: 1 - 0.05^(1/n).
	Bounds     []Bound    `json:"upper_bounds"`
	Invariants Invariants `json:"invariants"`
}

// Traffic is what arrived.
type Traffic struct {
	Minutes int            `json:"minutes"`
	Tickets int            `json:"tickets"`
	ByRep   map[string]int `json:"by_rep"`
	Small   int            `json:"refunds_under_50"`
	Mid     int            `json:"refunds_51_to_500"`
	High    int            `json:"refunds_above_500"`
	Reships int            `json:"reships"`
	// The caps the drill's bundles carry.
	RepDaily    money.Cents `json:"rep_daily_cap"`
	AgentHourly money.Cents `json:"agent_hourly_cap"`
	// Workflows by status at the end of the traffic.
	Ended map[string]int `json:"workflows_ended"`
}

// Event names of the timeline.
const (
	EventDeploy   = "deploy"
	EventAlert    = "alert"
	EventContain  = "contain"
	EventFix      = "fix"
	EventReenable = "reenable"
)

// Event is one step of the incident.
type Event struct {
	Name string `json:"name"`
	// Minute is the time after the release of p2, to a tenth of a minute.
	Minute float64 `json:"minute"`
	// At is the simulated time.
	At     time.Time `json:"at"`
	Detail string    `json:"detail"`
}

// Alert is one alert of the monitor.
type Alert struct {
	Minute  float64 `json:"minute"`
	Kind    string  `json:"kind"`
	Refunds int     `json:"refunds"`
	// Total is the amount of the refunds the alert names.
	Total   money.Cents `json:"total"`
	Message string      `json:"message"`
}

// Paused is what became of the workflows paused when the fix was released.
type Paused struct {
	Count     int              `json:"count"`
	Ended     map[string]int   `json:"ended"`
	Workflows []PausedWorkflow `json:"workflows"`
}

// PausedWorkflow is one workflow paused at the fix.
type PausedWorkflow struct {
	Workflow string      `json:"workflow"`
	Rep      string      `json:"rep"`
	Refund   money.Cents `json:"refund"`
	Reship   bool        `json:"reship"`
	Ended    string      `json:"ended"`
	// Rule is the rule that denied a step of a workflow that failed.
	Rule string `json:"rule,omitempty"`
}

// PolicyRow counts the refund steps whose last decision was made under one
// bundle revision.
type PolicyRow struct {
	Revision    string `json:"revision"`
	RefundSteps int    `json:"refund_steps"`
	Executed    int    `json:"executed"`
	// Violations executed above the auto limit without a used approval.
	Violations     int         `json:"above_auto_limit_without_approval"`
	ViolationTotal money.Cents `json:"above_auto_limit_without_approval_total"`
	// BlockedByCeiling were allowed by policy and refused by the ledger:
	// amount above the token's ceiling.
	BlockedByCeiling int `json:"blocked_by_token_ceiling"`
	DeniedByPolicy   int `json:"denied_by_policy"`
	// DeniedBy counts the denials by the rule that made them.
	DeniedBy map[string]int `json:"denied_by"`
	// Waiting were still waiting for a lead when the traffic ended.
	Waiting int `json:"waiting_at_end"`
}

// Worklist is reconciliation's refund_over_limit_without_approval findings
// after the traffic, with what the lead decided for each.
type Worklist struct {
	Count       int            `json:"count"`
	Total       money.Cents    `json:"total"`
	ByRep       map[string]int `json:"by_rep"`
	FirstMinute float64        `json:"first_minute"`
	LastMinute  float64        `json:"last_minute"`
	Items       []WorkItem     `json:"items"`
}

// Remediation actions.
const (
	ActionRatify  = "ratified"
	ActionReverse = "reversed"
)

// WorkItem is one refund on the worklist.
type WorkItem struct {
	Workflow string      `json:"workflow"`
	N        int         `json:"n"`
	Rep      string      `json:"rep"`
	Order    string      `json:"order"`
	Amount   money.Cents `json:"amount"`
	Minute   float64     `json:"minute"`
	Entry    string      `json:"entry"`
	Action   string      `json:"action"`
	By       string      `json:"by"`
	Reason   string      `json:"reason"`
	// Reversal is the ledger's reversal entry, for a reversed refund.
	Reversal string `json:"reversal,omitempty"`
}

// Remediation sums up the lead's review of the worklist.
type Remediation struct {
	Ratified      int         `json:"ratified"`
	RatifiedTotal money.Cents `json:"ratified_total"`
	Reversed      int         `json:"reversed"`
	// ToRecover is the total reversed: a reversal entry records the
	// intention; the money is recovered outside the system.
	ToRecover money.Cents `json:"to_recover"`
}

// Reconciliation is the reconciliation after remediation.
type Reconciliation struct {
	Classes     reconcile.Counts    `json:"classes"`
	Unexplained int                 `json:"unexplained"`
	Explained   reconcile.Explained `json:"explained"`
}

// SinceFix is the evidence after the fix: refunds decided under it.
type SinceFix struct {
	Revision         string `json:"revision"`
	Executed         int    `json:"executed"`
	UnderAutoLimit   int    `json:"under_auto_limit"`
	WithUsedApproval int    `json:"with_used_approval"`
	Violations       int    `json:"violations"`
}

// Bound is one upper bound.
type Bound struct {
	N     int     `json:"n"`
	Bound float64 `json:"bound"`
}

// Invariants are the properties every seed must keep, read from the
// systems of record and the records.
type Invariants struct {
	// ViolationsAfterContainment are ledger refunds made at or after
	// containment, above the auto limit, whose step had no used approval
	// before it ran.
	ViolationsAfterContainment int `json:"violations_after_containment"`
	// AboveCeiling are ledger refunds above the ceiling of the rep named
	// in them; LargestRefund the largest ledger refund.
	AboveCeiling  int         `json:"ledger_refunds_above_ceiling"`
	LargestRefund money.Cents `json:"largest_ledger_refund"`
	// Unexplained is reconciliation's count after remediation.
	Unexplained int `json:"unexplained_after_remediation"`
}

// Hold reports whether every invariant holds.
func (i Invariants) Hold() bool {
	return i.ViolationsAfterContainment == 0 && i.AboveCeiling == 0 && i.Unexplained == 0
}
