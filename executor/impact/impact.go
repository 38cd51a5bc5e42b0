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
}

// Change is a group of decisions that were From and would be To, by the
// candidate's Rule.
type Change struct {
	From     policy.Decision `json:"from"`
	To       policy.Decision `json:"to"`
	Rule     string          `json:"rule"`
	Count    int             `json:"count"`
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
// candidate's rule), sorted by count, largest first, then by from, to and
// rule. It fails on the first input that does not decode or that the
// candidate cannot evaluate (a candidate calling a forbidden built-in, or
// one past its deadline), and when ctx ends.
func Replay(ctx context.Context, candidate *policy.Bundle, decisions []store.Decision) (Report, error) {
	eval := policy.New(policy.Options{Timeout: evalTimeout})
	if err := eval.Restore(candidate); err != nil {
		return Report{}, fmt.Errorf("impact: %w", err)
	}
	report := Report{Changed: []Change{}}
	type key struct {
		from, to policy.Decision
		rule     string
	}
	groups := map[key]*Change{}
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
		from := policy.Decision(d.Decision)
		if res.Decision == from {
			continue
		}
		k := key{from, res.Decision, res.Rule}
		c, ok := groups[k]
		if !ok {
			c = &Change{From: from, To: res.Decision, Rule: res.Rule, Examples: []Example{}}
			groups[k] = c
		}
		c.Count++
		if len(c.Examples) < MaxExamples {
			c.Examples = append(c.Examples, Example{DecisionID: d.ID, Workflow: d.Workflow, N: d.N, Order: in.Args.Order, Amount: in.Args.Amount})
		}
	}
	for _, c := range groups {
		report.Changed = append(report.Changed, *c)
	}
	slices.SortFunc(report.Changed, func(a, b Change) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.From, b.From), cmp.Compare(a.To, b.To), cmp.Compare(a.Rule, b.Rule))
	})
	return report, nil
}
