package impact

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/store"
)

// DefaultLast is how many of the most recent decisions a replay reads
// unless told otherwise.
const DefaultLast = 10000

// MaxExamples is how many decisions a Change shows.
const MaxExamples = 3

// evalTimeout bounds each evaluation of the candidate. Like the gate's
// pinned cases it gets a second, so that a busy host does not fail a sound
// bundle; a candidate that loops stops the replay at its first decision.
const evalTimeout = time.Second

// Report is what a candidate would have decided otherwise.
type Report struct {
	// Replayed is how many decisions the candidate evaluated.
	Replayed int `json:"replayed"`
	// Skipped is how many had no recorded input (logged before inputs
	// were) and could not be replayed.
	Skipped int `json:"skipped"`
	// Changed groups the decisions that would come out otherwise, the
	// largest group first; [] when none would.
	Changed []Change `json:"changed"`
	// ChangedAmount is the money at stake in those decisions: the sum of
	// their calls' amounts (a call without one, a reship, counts zero).
	ChangedAmount money.Cents `json:"changed_amount"`
	// RuleChanged groups the decisions that would come out the same by
	// another rule (a REQUIRE_APPROVAL by R7 that would be one by R13),
	// the largest group first; [] when none would. Nothing is paid
	// otherwise, but the reason a person reads is another.
	RuleChanged []RuleChange `json:"rule_changed"`
}

// Change is a group of decisions that were From and would be To, by the
// candidate's Rule.
type Change struct {
	From  policy.Decision `json:"from"`
	To    policy.Decision `json:"to"`
	Rule  string          `json:"rule"`
	Count int             `json:"count"`
	// Amount is the sum of the group's amounts.
	Amount   money.Cents `json:"amount"`
	Examples []Example   `json:"examples"`
}

// RuleChange is a group of decisions that were Decision by FromRule (the
// rule recorded) and would be Decision still, by the candidate's ToRule.
type RuleChange struct {
	Decision policy.Decision `json:"decision"`
	FromRule string          `json:"from_rule"`
	ToRule   string          `json:"to_rule"`
	Count    int             `json:"count"`
	Amount   money.Cents     `json:"amount"`
	Examples []Example       `json:"examples"`
}

// Example is one decision of a Change, oldest first.
type Example struct {
	DecisionID string      `json:"decision_id"`
	Workflow   string      `json:"workflow"`
	N          int         `json:"n"`
	Order      string      `json:"order"`
	Amount     money.Cents `json:"amount,omitempty"`
}

// Replay evaluates the recorded input of each decision against candidate
// and reports the decisions that would change, grouped by (from, to, the
// candidate's rule), and those that would keep their outcome by another
// rule, grouped by (outcome, recorded rule, the candidate's rule); each
// list sorted by count, largest first, then by its keys. It fails on the
// first input that does not decode or that the candidate cannot evaluate
// (a candidate calling a forbidden built-in, or one past its deadline),
// and when ctx ends.
func Replay(ctx context.Context, candidate *policy.Bundle, decisions []store.Decision) (Report, error) {
	eval := policy.New(policy.Options{Timeout: evalTimeout})
	if err := eval.Restore(candidate); err != nil {
		return Report{}, fmt.Errorf("impact: %w", err)
	}
	report := Report{}
	type key struct {
		from, to         policy.Decision
		fromRule, toRule string
	}
	groups := map[key]*RuleChange{}
	for _, d := range decisions {
		if err := ctx.Err(); err != nil { // OPA may finish a short evaluation before it notices
			return Report{}, fmt.Errorf("impact: %w", err)
		}
		if len(d.Input) == 0 {
			report.Skipped++
			continue
		}
		in, err := engine.UnmarshalInput(d.Input)
		if err != nil {
			return Report{}, fmt.Errorf("impact: decision %d (%s/%d): %w", d.Seq, d.Workflow, d.N, err)
		}
		res, err := eval.Decide(ctx, in)
		if err != nil {
			return Report{}, fmt.Errorf("impact: replay decision %d (%s/%d) against %s: %w", d.Seq, d.Workflow, d.N, candidate.Revision(), err)
		}
		report.Replayed++
		k := key{from: policy.Decision(d.Decision), to: res.Decision, toRule: res.Rule}
		switch {
		case k.from != k.to:
			report.ChangedAmount += in.Args.Amount
		case d.Rule != res.Rule:
			k.fromRule = d.Rule
		default:
			continue
		}
		g, ok := groups[k]
		if !ok {
			g = &RuleChange{Decision: k.to, FromRule: k.fromRule, ToRule: k.toRule, Examples: []Example{}}
			groups[k] = g
		}
		g.Count++
		g.Amount += in.Args.Amount
		if len(g.Examples) < MaxExamples {
			g.Examples = append(g.Examples, Example{DecisionID: d.ID, Workflow: d.Workflow, N: d.N, Order: in.Args.Order, Amount: in.Args.Amount})
		}
	}
	report.Changed, report.RuleChanged = []Change{}, []RuleChange{}
	for k, g := range groups {
		if k.from != k.to {
			report.Changed = append(report.Changed, Change{From: k.from, To: k.to, Rule: k.toRule, Count: g.Count, Amount: g.Amount, Examples: g.Examples})
		} else {
			report.RuleChanged = append(report.RuleChanged, *g)
		}
	}
	slices.SortFunc(report.Changed, func(a, b Change) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.From, b.From), cmp.Compare(a.To, b.To), cmp.Compare(a.Rule, b.Rule))
	})
	slices.SortFunc(report.RuleChanged, func(a, b RuleChange) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Decision, b.Decision), cmp.Compare(a.FromRule, b.FromRule), cmp.Compare(a.ToRule, b.ToRule))
	})
	return report, nil
}
