package review

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign/executor/clock"
	"github.com/countersign/countersign/executor/policy"
)

// Allowances are the generated inputs on which a candidate is more
// permissive than the bundle it replaces: for a call, ALLOW over
// REQUIRE_APPROVAL over DENY; for an approval, allowed over refused. An
// evaluation that fails counts as a DENY or a refusal, as it does live.
type Allowances struct {
	// Count is how many inputs the candidate lets through further.
	Count int `json:"count"`
	// Evaluated is how many generated inputs the candidate was asked
	// about (the bundle in force is asked about those it lets through).
	Evaluated int `json:"evaluated"`
	// Examples are up to MaxExamples of them, in the order their inputs
	// were generated, one per distinct call or approval and verdicts.
	Examples []Allowance `json:"examples"`
	// Incomplete says why the evaluation stopped before every generated
	// input (a bundle past its deadline, the review's budget).
	Incomplete string `json:"incomplete,omitzero"`
	// Skipped says why no input was evaluated (the two bundles decide
	// alike by construction).
	Skipped string `json:"skipped,omitzero"`
}

// Allowance is one input the candidate answers more permissively.
type Allowance struct {
	// Kind is "call" (the call policy) or "approver" (the approver rules).
	Kind string `json:"kind"`
	// Input is the input as the policy sees it.
	Input     json.RawMessage `json:"input"`
	Active    Verdict         `json:"active"`
	Candidate Verdict         `json:"candidate"`
}

// Verdict is one bundle's answer: a call's decision and rule, or an
// approval's "allowed" or "refused" and the refusal's code.
type Verdict struct {
	Decision string `json:"decision"`
	Rule     string `json:"rule,omitzero"`
	// Error is set when the bundle could not answer; the verdict is then
	// the fail-closed one (DENY, refused).
	Error string `json:"error,omitzero"`
}

// The kinds of an Allowance.
const (
	KindCall     = "call"
	KindApprover = "approver"
)

// MaxExamples is how many allowances a review shows.
const MaxExamples = 10

// Budget bounds the evaluations of one review; evalTimeout each of them,
// as impact's replay does, so that a busy host does not fail a sound
// bundle while one that loops stops the review at its first input.
const (
	Budget      = 30 * time.Second
	evalTimeout = time.Second
)

// evalTime is when the call policy is evaluated: fixed, as the gate's
// cases are, so a review answers the same on every run. The approver
// inputs carry their own times.
var evalTime = time.Unix(1_700_000_000, 0).UTC()

// NewAllowances evaluates reference and candidate side by side on inputs
// generated from what they mention (see the package comment), the gate's
// cases at both bundles' limits and the logged inputs (a sample of recent
// decisions, most recent first: the first MaxLogged distinct are used),
// and counts the inputs on which candidate is more permissive. It fails
// only when ctx ends; a bundle that cannot be evaluated, or that runs past
// its deadline, makes the allowances Incomplete.
func NewAllowances(ctx context.Context, reference, candidate *policy.Bundle, logged []policy.Input) (Allowances, error) {
	out := Allowances{Examples: []Allowance{}}
	active, err := evaluator(reference)
	if err != nil {
		out.Incomplete = fmt.Sprintf("the bundle in force cannot be evaluated here: %v", err)
		return out, nil
	}
	cand, err := evaluator(candidate)
	if err != nil {
		out.Incomplete = fmt.Sprintf("the candidate cannot be evaluated: %v", err)
		return out, nil
	}
	calls, approvals := Inputs(reference, candidate, logged)
	ctx, cancel := context.WithTimeout(ctx, Budget)
	defer cancel()
	var found []Allowance
	stop := func(err error) bool {
		if errors.Is(err, policy.ErrTimeout) || ctx.Err() != nil {
			out.Incomplete = fmt.Sprintf("stopped after %d of %d inputs: %v", out.Evaluated, len(calls)+len(approvals), errors.Join(err, ctx.Err()))
			return true
		}
		return false
	}
	// The bundle in force is asked only when the candidate lets the input
	// through at all: a DENY or a refusal is never more permissive.
	for _, in := range calls {
		c, errC := cand.Decide(ctx, in)
		if stop(errC) {
			break
		}
		out.Evaluated++
		if callRank(c, errC) == 0 {
			continue
		}
		a, errA := active.Decide(ctx, in)
		if stop(errA) {
			break
		}
		if callRank(c, errC) > callRank(a, errA) {
			raw, err := policy.InputJSON(in)
			if err != nil {
				return Allowances{}, fmt.Errorf("review: %w", err)
			}
			found = append(found, Allowance{Kind: KindCall, Input: raw, Active: callVerdict(a, errA), Candidate: callVerdict(c, errC)})
		}
	}
	for _, in := range approvals {
		if out.Incomplete != "" {
			break
		}
		c, errC := cand.CheckApprover(ctx, in)
		if stop(errC) {
			break
		}
		out.Evaluated++
		if errC != nil || c != "" {
			continue
		}
		a, errA := active.CheckApprover(ctx, in)
		if stop(errA) {
			break
		}
		if errA != nil || a != "" {
			raw, err := policy.ApproverInputJSON(in)
			if err != nil {
				return Allowances{}, fmt.Errorf("review: %w", err)
			}
			found = append(found, Allowance{Kind: KindApprover, Input: raw, Active: approverVerdict(a, errA), Candidate: approverVerdict(c, errC)})
		}
	}
	if err := ctx.Err(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return Allowances{}, fmt.Errorf("review: %w", err)
	}
	out.Count = len(found)
	out.Examples = examples(found)
	return out, nil
}

// examples are the first MaxExamples allowances in the order their inputs
// were generated (the changed rules' first), one for each who, what, how
// much and pair of verdicts: ten inputs that differ only in a total or a
// workflow's bounds would show a reviewer one thing ten times.
func examples(found []Allowance) []Allowance {
	out := []Allowance{}
	seen := map[string]bool{}
	for _, a := range found {
		var in struct {
			User      *struct{ ID, Region string }
			Tool      string
			Args      struct{ Order string }
			Amount    json.Number
			Approver  struct{ ID, Role, Region string }
			Requester struct{ ID string }
		}
		var args struct {
			Args struct {
				Amount json.Number `json:"amount"`
			} `json:"args"`
		}
		_ = json.Unmarshal(a.Input, &in)
		_ = json.Unmarshal(a.Input, &args)
		key := fmt.Sprint(a.Kind, in.User, in.Tool, in.Args.Order, args.Args.Amount, in.Amount, in.Approver, in.Requester, a.Active, a.Candidate)
		if seen[key] {
			continue
		}
		seen[key] = true
		if out = append(out, a); len(out) == MaxExamples {
			break
		}
	}
	return out
}

// Inputs are the call and approver inputs NewAllowances evaluates, in the
// order of the package comment's tiers, at most MaxCallInputs and
// MaxApproverInputs of them.
func Inputs(reference, candidate *policy.Bundle, logged []policy.Input) ([]policy.Input, []policy.ApproverInput) {
	l := newLiterals()
	l.addBundle(reference, 1)
	l.addBundle(candidate, 2)
	limits := []policy.Limits{reference.Limits()}
	if candidate.Limits() != reference.Limits() {
		limits = append(limits, candidate.Limits())
	}
	// The logged inputs first: real orders and people, where an example
	// reads as what would happen.
	recent := newSet[policy.Input](MaxLogged, callKey)
	for _, in := range logged {
		recent.add(in)
	}
	callBases := recent.items
	var approverBases []policy.ApproverInput
	for _, lim := range limits {
		callBases = append(callBases, policy.CaseInputs(lim)...)
		approverBases = append(approverBases, policy.ApproverCaseInputs(lim)...)
	}
	bounds := []policy.Bounds{reference.Autonomy().Bounds}
	if b := candidate.Autonomy().Bounds; b != bounds[0] {
		bounds = append(bounds, b)
	}
	p := poolsOf(l, kindsOf(callMembers, approverMembers), seenIn(callBases, approverBases))
	return callInputs(l, p, callBases, bounds, MaxCallInputs), approverInputs(l, p, approverBases, MaxApproverInputs)
}

// evaluator is an engine with b restored, on the review's fixed clock.
func evaluator(b *policy.Bundle) (*policy.Engine, error) {
	e := policy.New(policy.Options{Timeout: evalTimeout, Clock: fixedClock{}})
	if err := e.Restore(b); err != nil {
		return nil, err
	}
	return e, nil
}

// fixedClock is always evalTime.
type fixedClock struct{}

func (fixedClock) Now() time.Time { return evalTime }

var _ clock.Clock = fixedClock{}

func callRank(r policy.Result, err error) int {
	if err != nil {
		return 0
	}
	switch r.Decision {
	case policy.Allow:
		return 2
	case policy.RequireApproval:
		return 1
	}
	return 0
}

func callVerdict(r policy.Result, err error) Verdict {
	if err != nil {
		return Verdict{Decision: string(policy.Deny), Error: err.Error()}
	}
	return Verdict{Decision: string(r.Decision), Rule: r.Rule}
}

func approverVerdict(r policy.Refusal, err error) Verdict {
	switch {
	case err != nil:
		return Verdict{Decision: "refused", Error: err.Error()}
	case r == "":
		return Verdict{Decision: "allowed"}
	}
	return Verdict{Decision: "refused", Rule: string(r)}
}
