package reconcile

import (
	"bytes"
	"encoding/json"
	"slices"
	"time"

	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/store"
)

// Class is one kind of agreement or difference between the agent's records
// and the systems of record.
type Class string

// The eight classes, in report order.
const (
	Matched                        Class = "matched"
	AgentDoneLedgerMissing         Class = "agent_done_ledger_missing"
	AmountMismatch                 Class = "amount_mismatch"
	LedgerEntryWithoutStep         Class = "ledger_entry_without_step"
	InFlightLedgerHasIt            Class = "in_flight_ledger_has_it"
	InFlightLedgerLacksIt          Class = "in_flight_ledger_lacks_it"
	RefundOverLimitWithoutApproval Class = "refund_over_limit_without_approval"
	ShipmentCountMismatch          Class = "shipment_count_mismatch"
)

// Classes returns the eight classes in report order.
func Classes() []Class {
	return []Class{
		Matched, AgentDoneLedgerMissing, AmountMismatch, LedgerEntryWithoutStep,
		InFlightLedgerHasIt, InFlightLedgerLacksIt, RefundOverLimitWithoutApproval, ShipmentCountMismatch,
	}
}

// Repair says who may act on a class of finding, and how.
type Repair struct {
	// Who may act: "countersign" for the automatic repairs, otherwise the
	// role of the person who decides.
	Who string `json:"who"`
	// Automatic is true only where acting cannot create a second effect.
	Automatic bool   `json:"automatic"`
	Action    string `json:"action"`
}

// RepairOf returns the repair class of c; matched has none.
func RepairOf(c Class) (Repair, bool) {
	switch c {
	case AgentDoneLedgerMissing:
		return Repair{Who: "a person", Action: "look the key up in the ledger once more; only after a person has " +
			"confirmed the entry is really gone, replay the refund under the step's own key (should the " +
			"first write surface after all, the ledger answers with it instead of paying again)"}, true
	case AmountMismatch:
		return Repair{Who: "finance", Action: "freeze the step and the entry as they are; finance establishes " +
			"the right amount and corrects it with a new entry; neither record is overwritten"}, true
	case LedgerEntryWithoutStep:
		return Repair{Who: "a person", Action: "decide what the entry is: made outside countersign (leave it, " +
			"nothing to do) or an agent refund whose record was lost (adopt it by its key)"}, true
	case InFlightLedgerHasIt:
		return Repair{Who: "countersign", Automatic: true, Action: "resume the workflow: it sends the same key " +
			"again, the ledger answers with the entry it already holds and the step records it"}, true
	case InFlightLedgerLacksIt:
		return Repair{Who: "countersign", Automatic: true, Action: "resume the workflow: it dispatches under the " +
			"step's key, so at most one entry can ever result"}, true
	case RefundOverLimitWithoutApproval:
		return Repair{Who: "a lead", Action: "ratify the refund with a retroactive approval recorded as such, " +
			"or have it reversed in the ledger; either needs a lead"}, true
	case ShipmentCountMismatch:
		return Repair{Who: "operations", Action: "operations decides whether each extra or missing shipment " +
			"stands; reconciliation never touches the order system"}, true
	}
	return Repair{}, false
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

// AmountDifference is a done refund step whose ledger entry has another amount.
type AmountDifference struct {
	StepRef
	StepAmount   money.Cents `json:"step_amount"`
	LedgerAmount money.Cents `json:"ledger_amount"`
	Entry        string      `json:"entry"`
}

// UnclaimedEntry is a refund or external ledger entry that no executed step
// accounts for.
type UnclaimedEntry struct {
	Entry  string      `json:"entry"`
	Kind   string      `json:"kind"`
	Order  string      `json:"order"`
	Amount money.Cents `json:"amount"`
	By     string      `json:"by"`
	Key    string      `json:"key,omitempty"`
	// Step is a step that holds the entry's key but records no effect
	// (pending, held, denied ...): the candidate for adoption by key.
	Step *StepRef `json:"step,omitempty"`
}

// InFlight is a refund step left started or unknown.
type InFlight struct {
	StepRef
	Amount money.Cents      `json:"amount"`
	Status store.StepStatus `json:"status"`
	// Entry is the ledger entry under the step's key, when there is one.
	Entry string `json:"entry,omitempty"`
}

// OverLimit is a refund above the auto limit that executed without a used
// approval naming exactly that call, and was not reversed.
type OverLimit struct {
	StepRef
	Amount money.Cents `json:"amount"`
	Rep    string      `json:"rep"`
	// At is when the step finished, or when it was reserved if it never
	// recorded an end.
	At time.Time `json:"at"`
	// Entry is the ledger entry under the step's key, when there is one.
	Entry string `json:"entry,omitempty"`
	// Approval is the approval the step carries, if any; it did not count
	// (not used, or for another call).
	Approval string `json:"approval,omitempty"`
	// Limit is the auto limit the refund was held to: that of the bundle
	// whose decision let it run (Revision), or, when Note says why that
	// one's own cannot be used, the strictest known.
	Limit money.Cents `json:"limit"`
	// Revision is the bundle whose decision let the refund run, when the
	// decision log names it.
	Revision string `json:"revision,omitempty"`
	// Note, when set, says why the refund was not held to the limit of the
	// bundle that decided it.
	Note string `json:"note,omitempty"`
}

// ShipmentDifference is an order whose shipments and done reship steps differ.
type ShipmentDifference struct {
	Order     string `json:"order"`
	Shipments int    `json:"shipments"`
	Steps     int    `json:"steps"`
}

// Findings are the differences, one list per failure class. Matches are
// only counted; their list is always empty in JSON.
type Findings struct {
	AgentDoneLedgerMissing         []MissingEntry       `json:"agent_done_ledger_missing"`
	AmountMismatch                 []AmountDifference   `json:"amount_mismatch"`
	LedgerEntryWithoutStep         []UnclaimedEntry     `json:"ledger_entry_without_step"`
	InFlightLedgerHasIt            []InFlight           `json:"in_flight_ledger_has_it"`
	InFlightLedgerLacksIt          []InFlight           `json:"in_flight_ledger_lacks_it"`
	RefundOverLimitWithoutApproval []OverLimit          `json:"refund_over_limit_without_approval"`
	ShipmentCountMismatch          []ShipmentDifference `json:"shipment_count_mismatch"`
}

// Len returns how many findings class c has (0 for matched).
func (f Findings) Len(c Class) int {
	switch c {
	case AgentDoneLedgerMissing:
		return len(f.AgentDoneLedgerMissing)
	case AmountMismatch:
		return len(f.AmountMismatch)
	case LedgerEntryWithoutStep:
		return len(f.LedgerEntryWithoutStep)
	case InFlightLedgerHasIt:
		return len(f.InFlightLedgerHasIt)
	case InFlightLedgerLacksIt:
		return len(f.InFlightLedgerLacksIt)
	case RefundOverLimitWithoutApproval:
		return len(f.RefundOverLimitWithoutApproval)
	case ShipmentCountMismatch:
		return len(f.ShipmentCountMismatch)
	}
	return 0
}

// MarshalJSON writes every class, matched included, with [] for none, so a
// reader can index any class without checking for null or absence.
func (f Findings) MarshalJSON() ([]byte, error) {
	type fields Findings // no MarshalJSON: no recursion
	g := fields{
		AgentDoneLedgerMissing:         nonNil(f.AgentDoneLedgerMissing),
		AmountMismatch:                 nonNil(f.AmountMismatch),
		LedgerEntryWithoutStep:         nonNil(f.LedgerEntryWithoutStep),
		InFlightLedgerHasIt:            nonNil(f.InFlightLedgerHasIt),
		InFlightLedgerLacksIt:          nonNil(f.InFlightLedgerLacksIt),
		RefundOverLimitWithoutApproval: nonNil(f.RefundOverLimitWithoutApproval),
		ShipmentCountMismatch:          nonNil(f.ShipmentCountMismatch),
	}
	return json.Marshal(struct {
		Matched []struct{} `json:"matched"`
		fields
	}{[]struct{}{}, g})
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// Explained counts refunds that differ from the plain case for a reason
// already on record: they are neither matched nor findings.
type Explained struct {
	// Reversed: refund entries a reversal undid, whether or not a step
	// accounts for them.
	Reversed int `json:"reversed"`
	// Ratified: refunds above the auto limit without a prior approval that
	// a lead ratified with a retroactive approval.
	Ratified int `json:"ratified"`
}

// Counts are the counts of the classes. JSON writes them in report order.
type Counts map[Class]int

// MarshalJSON writes the classes in report order, for people reading it.
func (c Counts) MarshalJSON() ([]byte, error) { return marshalInOrder(c) }

// Repairs are the repair classes of the failure classes. JSON writes them
// in report order.
type Repairs map[Class]Repair

// MarshalJSON writes the classes in report order, for people reading it.
func (r Repairs) MarshalJSON() ([]byte, error) { return marshalInOrder(r) }

// marshalInOrder writes m as a JSON object with the known classes first, in
// report order, then any other keys sorted.
func marshalInOrder[T any](m map[Class]T) ([]byte, error) {
	keys := Classes()
	var rest []Class
	for k := range m {
		if !slices.Contains(keys, k) {
			rest = append(rest, k)
		}
	}
	slices.Sort(rest)
	var b bytes.Buffer
	b.WriteByte('{')
	first := true
	for _, k := range append(keys, rest...) {
		v, ok := m[k]
		if !ok {
			continue
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		kj, err := json.Marshal(string(k))
		if err != nil {
			return nil, err
		}
		vj, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		b.Write(kj)
		b.WriteByte(':')
		b.Write(vj)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// Report is the outcome of one reconciliation.
type Report struct {
	At time.Time `json:"at"`
	// AutoLimit is the designed limit: the one a refund is held to when
	// the bundle that decided it cannot vouch for a limit of its own and
	// nothing stricter is known. Each finding names the limit it was held
	// to.
	AutoLimit money.Cents `json:"auto_limit"`
	// Classes counts each of the eight classes; all are always present.
	Classes  Counts   `json:"classes"`
	Findings Findings `json:"findings"`
	// Repairs gives the repair class of each failure class.
	Repairs Repairs `json:"repairs"`
	// Unexplained is the number of findings over all classes: the figure a
	// gauge shows and a remediation drives to zero.
	Unexplained int       `json:"unexplained"`
	Explained   Explained `json:"explained"`
}

// Count returns the count of class c.
func (r Report) Count(c Class) int { return r.Classes[c] }

// Clean reports whether there is no unexplained difference.
func (r Report) Clean() bool { return r.Unexplained == 0 }

// finish fills the counts, the repairs and the total from the findings.
func (r *Report) finish(matched int) {
	r.Classes = make(Counts, 8)
	r.Repairs = make(Repairs, 7)
	r.Unexplained = 0
	for _, c := range Classes() {
		if c == Matched {
			r.Classes[c] = matched
			continue
		}
		n := r.Findings.Len(c)
		r.Classes[c] = n
		r.Unexplained += n
		r.Repairs[c], _ = RepairOf(c)
	}
}
