package reconcile

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/countersign/countersign/executor/dispatch"
	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

// ShadowReport compares what an agent proposed while its tools were in
// shadow mode with what people did in the systems of record for the same
// orders over the same period: the evidence an operator weighs before
// moving a tool from shadow to approval_only or auto.
//
// It works per order and tool (refunds against the ledger, reships
// against the order system). The agent "would have acted" on an order
// when one of its shadowed proposals there was allowed or would have gone
// to a lead; people "acted" when the system of record holds an external
// entry or shipment for the order (one a person made, not through
// countersign) at or after the first shadowed proposal.
type ShadowReport struct {
	At time.Time `json:"at"`
	// Since is the first shadowed proposal; zero when there is none.
	Since time.Time `json:"since,omitzero"`
	// Proposals is how many shadowed proposals of refunds and reships
	// there are; Orders how many order and tool pairs they cover.
	Proposals int `json:"proposals"`
	Orders    int `json:"orders"`
	// Agreement counts the pairs where the agent and the people agreed:
	// both acted, or neither did.
	Agreement int `json:"agreement"`
	// WouldHaveActed are pairs where the agent would have paid (or
	// shipped) and nobody did; PeopleActed the reverse.
	WouldHaveActed []ShadowCase `json:"would_have_paid_nothing_paid"`
	PeopleActed    []ShadowCase `json:"paid_would_not_have"`
	// Agreed are the pairs of Agreement, for a person checking amounts.
	Agreed []ShadowCase `json:"agreed"`
}

// ShadowCase is one order and tool: what the agent proposed there in
// shadow and what people did.
type ShadowCase struct {
	Order string    `json:"order"`
	Tool  tool.Name `json:"tool"`
	// Proposed is the sum of the refunds the agent would have paid (0 for
	// reships and when it would have paid nothing); Proposals its steps.
	Proposed  money.Cents    `json:"proposed"`
	Proposals []ShadowedStep `json:"proposals"`
	// Paid is the sum of the people's refunds, Shipped their reships.
	Paid    money.Cents `json:"paid"`
	Shipped int         `json:"shipped"`
	By      []string    `json:"by"`
}

// ShadowedStep is one shadowed proposal and the decision that would have
// applied.
type ShadowedStep struct {
	Workflow string      `json:"workflow"`
	N        int         `json:"n"`
	Amount   money.Cents `json:"amount,omitempty"`
	Decision string      `json:"decision"`
	Rule     string      `json:"rule"`
}

// acts reports whether a shadowed decision would have led to the effect.
func (s ShadowedStep) acts() bool { return s.Decision == "ALLOW" || s.Decision == "REQUIRE_APPROVAL" }

// Shadow reads the three sources and compares them (CompareShadow).
func (j *Job) Shadow(ctx context.Context) (ShadowReport, error) {
	recs, err := j.o.Records.Records(ctx)
	if err != nil {
		return ShadowReport{}, fmt.Errorf("%w: the agent's records: %w", ErrRead, err)
	}
	entries, err := j.o.Ledger.Entries(ctx)
	if err != nil {
		return ShadowReport{}, fmt.Errorf("%w: the ledger's entries: %w", ErrRead, err)
	}
	shipments, err := j.o.Shipments.AllShipments(ctx)
	if err != nil {
		return ShadowReport{}, fmt.Errorf("%w: the order system's shipments: %w", ErrRead, err)
	}
	return CompareShadow(recs.Steps, entries, shipments, j.o.Clock.Now()), nil
}

// CompareShadow classifies the shadowed steps against the people's
// entries and shipments, at now.
func CompareShadow(steps []store.Step, entries []dispatch.Entry, shipments []dispatch.Shipment, now time.Time) ShadowReport {
	r := ShadowReport{At: at(now)}
	type key struct {
		order string
		tool  tool.Name
	}
	cases := map[key]*ShadowCase{}
	var order []key
	for _, s := range steps {
		if s.Status != store.StepShadowed || (s.Tool != tool.IssueRefund && s.Tool != tool.ReshipOrder) {
			continue
		}
		r.Proposals++
		if r.Since.IsZero() || s.Created.Before(r.Since) {
			r.Since = s.Created
		}
		k := key{s.Args.Order, s.Tool}
		c, ok := cases[k]
		if !ok {
			c = &ShadowCase{Order: k.order, Tool: k.tool, Proposals: []ShadowedStep{}, By: []string{}}
			cases[k] = c
			order = append(order, k)
		}
		p := ShadowedStep{Workflow: s.Workflow, N: s.N, Decision: s.Decision, Rule: s.Rule}
		if s.Tool == tool.IssueRefund {
			p.Amount = s.Args.Amount
			if p.acts() {
				c.Proposed += s.Args.Amount
			}
		}
		c.Proposals = append(c.Proposals, p)
	}
	byPerson := func(c *ShadowCase, by string) {
		if !slices.Contains(c.By, by) {
			c.By = append(c.By, by)
		}
	}
	for _, e := range entries {
		c := cases[key{e.Order, tool.IssueRefund}]
		if c != nil && e.Kind == "external" && !e.At.Before(r.Since) {
			c.Paid += e.Amount
			byPerson(c, e.By)
		}
	}
	for _, s := range shipments {
		c := cases[key{s.Order, tool.ReshipOrder}]
		if c != nil && s.Kind == "external" && !s.At.Before(r.Since) {
			c.Shipped++
			byPerson(c, s.By)
		}
	}
	r.Orders = len(order)
	r.WouldHaveActed, r.PeopleActed, r.Agreed = []ShadowCase{}, []ShadowCase{}, []ShadowCase{}
	for _, k := range order {
		c := cases[k]
		agent := slices.ContainsFunc(c.Proposals, ShadowedStep.acts)
		people := c.Paid > 0 || c.Shipped > 0
		switch {
		case agent == people:
			r.Agreement++
			r.Agreed = append(r.Agreed, *c)
		case agent:
			r.WouldHaveActed = append(r.WouldHaveActed, *c)
		default:
			r.PeopleActed = append(r.PeopleActed, *c)
		}
	}
	return r
}
