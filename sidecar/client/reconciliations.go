package client

import (
	"context"
	"net/http"
	"time"

	"github.com/countersign/countersign/executor/money"
)

// Reconcile runs a reconciliation (an operator's): the agent's records
// against the ledger and the order system, each difference classified,
// nothing overwritten. A system of record it cannot read is a 503
// system_unavailable.
func (c *Client) Reconcile(ctx context.Context) (Reconciliation, error) {
	var r Reconciliation
	err := c.call(ctx, http.MethodPost, "/v1/reconciliations", nil, nil, &r)
	return r, err
}

// LatestReconciliation reads the report of the last reconciliation (404
// not_found before the first).
func (c *Client) LatestReconciliation(ctx context.Context) (Reconciliation, error) {
	var r Reconciliation
	err := c.call(ctx, http.MethodGet, "/v1/reconciliations/latest", nil, nil, &r)
	return r, err
}

// Reconciliation is the report of one reconciliation: a count of each of
// the eight classes, the findings of the seven failure classes, who may
// repair each, and the differences already explained on record.
type Reconciliation struct {
	At time.Time `json:"at"`
	// AutoLimit is the designed auto limit, which a refund is held to when
	// the bundle that decided it cannot vouch for a limit of its own and
	// nothing stricter is known.
	AutoLimit money.Cents `json:"auto_limit"`
	Classes   ClassCounts `json:"classes"`
	Findings  Findings    `json:"findings"`
	Repairs   Repairs     `json:"repairs"`
	// Unexplained is the number of findings over all classes: zero when
	// the records agree.
	Unexplained int       `json:"unexplained"`
	Explained   Explained `json:"explained"`
}

// ClassCounts counts each class, in report order.
type ClassCounts struct {
	Matched                        int `json:"matched"`
	AgentDoneLedgerMissing         int `json:"agent_done_ledger_missing"`
	AmountMismatch                 int `json:"amount_mismatch"`
	LedgerEntryWithoutStep         int `json:"ledger_entry_without_step"`
	InFlightLedgerHasIt            int `json:"in_flight_ledger_has_it"`
	InFlightLedgerLacksIt          int `json:"in_flight_ledger_lacks_it"`
	RefundOverLimitWithoutApproval int `json:"refund_over_limit_without_approval"`
	ShipmentCountMismatch          int `json:"shipment_count_mismatch"`
}

// Findings are the differences, one list per class ([] for none).
type Findings struct {
	// Matched is always empty: matches are only counted.
	Matched                        []struct{}           `json:"matched"`
	AgentDoneLedgerMissing         []MissingEntry       `json:"agent_done_ledger_missing"`
	AmountMismatch                 []AmountDifference   `json:"amount_mismatch"`
	LedgerEntryWithoutStep         []UnclaimedEntry     `json:"ledger_entry_without_step"`
	InFlightLedgerHasIt            []InFlight           `json:"in_flight_ledger_has_it"`
	InFlightLedgerLacksIt          []InFlight           `json:"in_flight_ledger_lacks_it"`
	RefundOverLimitWithoutApproval []OverLimit          `json:"refund_over_limit_without_approval"`
	ShipmentCountMismatch          []ShipmentDifference `json:"shipment_count_mismatch"`
}

// Repairs are the repair of each failure class, in report order.
type Repairs struct {
	AgentDoneLedgerMissing         Repair `json:"agent_done_ledger_missing"`
	AmountMismatch                 Repair `json:"amount_mismatch"`
	LedgerEntryWithoutStep         Repair `json:"ledger_entry_without_step"`
	InFlightLedgerHasIt            Repair `json:"in_flight_ledger_has_it"`
	InFlightLedgerLacksIt          Repair `json:"in_flight_ledger_lacks_it"`
	RefundOverLimitWithoutApproval Repair `json:"refund_over_limit_without_approval"`
	ShipmentCountMismatch          Repair `json:"shipment_count_mismatch"`
}

// Repair says who may act on a class of finding, and how. Automatic is
// true only where acting cannot create a second effect.
type Repair struct {
	Who       string `json:"who"`
	Automatic bool   `json:"automatic"`
	Action    string `json:"action"`
}

// Explained counts refunds that differ from the plain case for a reason
// already on record: reversed in the ledger, or ratified by a lead.
type Explained struct {
	Reversed int `json:"reversed"`
	Ratified int `json:"ratified"`
}

// StepRef names one step and the order it acts on.
type StepRef struct {
	Workflow string `json:"workflow"`
	N        int    `json:"n"`
	Order    string `json:"order"`
}

// MissingEntry is a done refund step whose key the ledger does not hold.
type MissingEntry struct {
	StepRef
	Amount money.Cents `json:"amount"`
	Key    string      `json:"key"`
}

// AmountDifference is a done refund step whose ledger entry has another
// amount.
type AmountDifference struct {
	StepRef
	StepAmount   money.Cents `json:"step_amount"`
	LedgerAmount money.Cents `json:"ledger_amount"`
	Entry        string      `json:"entry"`
}

// UnclaimedEntry is a ledger entry that no executed step accounts for.
// Step is a step that holds its key but records no effect: the candidate
// for adoption by key.
type UnclaimedEntry struct {
	Entry  string      `json:"entry"`
	Kind   string      `json:"kind"`
	Order  string      `json:"order"`
	Amount money.Cents `json:"amount"`
	By     string      `json:"by"`
	Key    string      `json:"key,omitempty"`
	Step   *StepRef    `json:"step,omitempty"`
}

// InFlight is a refund step left started or unknown, with the ledger
// entry under its key when there is one.
type InFlight struct {
	StepRef
	Amount money.Cents `json:"amount"`
	Status StepStatus  `json:"status"`
	Entry  string      `json:"entry,omitempty"`
}

// OverLimit is a refund above the auto limit that executed without a used
// approval naming exactly that call, and was not reversed. Limit is the
// auto limit it was held to: that of the bundle whose decision let it run
// (Revision), or, when Note says why that one's cannot be used, the
// strictest known.
type OverLimit struct {
	StepRef
	Amount   money.Cents `json:"amount"`
	Rep      string      `json:"rep"`
	At       time.Time   `json:"at"`
	Entry    string      `json:"entry,omitempty"`
	Approval string      `json:"approval,omitempty"`
	Limit    money.Cents `json:"limit"`
	Revision string      `json:"revision,omitempty"`
	Note     string      `json:"note,omitempty"`
}

// ShipmentDifference is an order whose shipments and done reship steps
// differ in number.
type ShipmentDifference struct {
	Order     string `json:"order"`
	Shipments int    `json:"shipments"`
	Steps     int    `json:"steps"`
}
