// Package effectiveness reports how the controls are doing, per tool and
// agent version, from the sidecar's own records: what agents proposed, what
// the schema and the policy refused and by which rule, what leads approved,
// rejected or let expire (the overturn rate) and how long they took,
// duplicates suppressed, outcomes that were unknown and how they were
// resolved, and compensations. It is the evidence an operator reads before
// moving a tool from shadow to approval_only to auto.
package effectiveness

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/store"
)

// Report is the controls' record since a moment.
type Report struct {
	Since time.Time `json:"since"`
	Until time.Time `json:"until"`
	// Rows has one row per tool and agent version with anything to show,
	// sorted by tool, then agent version.
	Rows []Row `json:"rows"`
}

// Row is one tool under one agent version ("" for workflows opened
// without one).
type Row struct {
	Tool         string `json:"tool"`
	AgentVersion string `json:"agent_version"`
	// Proposals counts every call proposed: the steps admitted plus the
	// proposals the schema refused, which never became steps.
	Proposals        int `json:"proposals"`
	SchemaRejections int `json:"schema_rejections"`
	// Denials counts the policy's DENY decisions by rule (shadow decisions
	// excluded: they stopped nothing).
	Denials map[string]int `json:"denials"`
	// Shadowed counts steps decided in shadow mode.
	Shadowed  int       `json:"shadowed"`
	Approvals Approvals `json:"approvals"`
	// DuplicatesSuppressed counts steps that repeated a call of their
	// workflow and were not dispatched.
	DuplicatesSuppressed int     `json:"duplicates_suppressed"`
	Unknown              Unknown `json:"unknown_outcomes"`
	// Compensations counts steps reversed and refunds ratified after the
	// fact.
	Compensations int `json:"compensations"`
}

// Approvals are the approval requests of a row, by how they ended.
type Approvals struct {
	Requested int `json:"requested"`
	Approved  int `json:"approved"` // approved or used
	Rejected  int `json:"rejected"`
	Expired   int `json:"expired"`
	Pending   int `json:"pending"`
	// OverturnRate is Rejected / (Approved + Rejected): how often a lead
	// said no to what the agent proposed. 0 when no lead decided.
	OverturnRate float64 `json:"overturn_rate"`
	// P50SecondsToApproval is the median time from request to approval,
	// in seconds; 0 when nothing was approved.
	P50SecondsToApproval float64 `json:"p50_seconds_to_approval"`
}

// Unknown are the steps whose outcome could not be seen at the time.
type Unknown struct {
	// Open are still unknown: a person reconciles them.
	Open int `json:"open"`
	// ResolvedByLookup were found done by the ledger's key or the order
	// system's reference, or by a shipment count.
	ResolvedByLookup int `json:"resolved_by_lookup"`
}

type key struct{ tool, version string }

// Compute reads the records made at or after since, up to now, in one read
// transaction.
func Compute(db *store.DB, since, now time.Time) (Report, error) {
	rows := map[key]*Row{}
	row := func(tool, version string) *Row {
		k := key{tool, version}
		r := rows[k]
		if r == nil {
			r = &Row{Tool: tool, AgentVersion: version, Denials: map[string]int{}}
			rows[k] = r
		}
		return r
	}
	waits := map[key][]time.Duration{}
	err := db.View(func(tx *store.Tx) error {
		workflows, err := tx.Workflows(nil)
		if err != nil {
			return err
		}
		version := make(map[string]string, len(workflows))
		for _, w := range workflows {
			version[w.ID] = w.AgentVersion
		}
		if err := tx.AllSteps(func(s store.Step) error {
			if s.Created.Before(since) {
				return nil
			}
			r := row(string(s.Tool), version[s.Workflow])
			r.Proposals++
			switch {
			case s.Status == store.StepSuppressed:
				r.DuplicatesSuppressed++
			case s.Status == store.StepShadowed:
				r.Shadowed++
			case s.Status == store.StepCompensated:
				r.Compensations++
			case s.Status == store.StepUnknown:
				r.Unknown.Open++
			case strings.HasPrefix(s.Note, "resolved by"):
				r.Unknown.ResolvedByLookup++
			}
			return nil
		}); err != nil {
			return err
		}
		if err := tx.Rejections(since, func(rj store.Rejection) error {
			r := row(string(rj.Tool), rj.AgentVersion)
			r.Proposals++
			r.SchemaRejections++
			return nil
		}); err != nil {
			return err
		}
		if err := tx.EachDecision(store.DecisionFilter{Since: since}, func(d store.Decision) error {
			if d.Decision == string(policy.Deny) && !d.Shadow {
				row(string(d.Tool), version[d.Workflow]).Denials[d.Rule]++
			}
			return nil
		}); err != nil {
			return err
		}
		approvals, err := tx.Approvals(func(a store.Approval) bool { return !a.Created.Before(since) })
		if err != nil {
			return err
		}
		for _, a := range approvals {
			k := key{string(a.Tool), version[a.Workflow]}
			r := row(k.tool, k.version)
			if a.Retroactive {
				r.Compensations++ // a refund ratified after the fact
				continue
			}
			r.Approvals.Requested++
			switch a.Status {
			case store.ApprovalApproved, store.ApprovalUsed:
				r.Approvals.Approved++
				if !a.Decided.IsZero() {
					waits[k] = append(waits[k], a.Decided.Sub(a.Created))
				}
			case store.ApprovalRejected:
				r.Approvals.Rejected++
			case store.ApprovalExpired:
				r.Approvals.Expired++
			case store.ApprovalPending:
				r.Approvals.Pending++
			}
		}
		return nil
	})
	if err != nil {
		return Report{}, err
	}
	out := Report{Since: since.UTC(), Until: now.UTC(), Rows: make([]Row, 0, len(rows))}
	for k, r := range rows {
		if decided := r.Approvals.Approved + r.Approvals.Rejected; decided > 0 {
			r.Approvals.OverturnRate = float64(r.Approvals.Rejected) / float64(decided)
		}
		r.Approvals.P50SecondsToApproval = median(waits[k]).Seconds()
		out.Rows = append(out.Rows, *r)
	}
	slices.SortFunc(out.Rows, func(a, b Row) int {
		return cmp.Or(cmp.Compare(a.Tool, b.Tool), cmp.Compare(a.AgentVersion, b.AgentVersion))
	})
	return out, nil
}

// median is the middle duration (the lower of the two middle ones for an
// even count); 0 for none.
func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[(len(d)-1)/2]
}
