package demo

import (
	"context"
	"fmt"

	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

// DecisionRow is one refund request and what the active bundle made of it.
type DecisionRow struct {
	User   string      `json:"user"`
	Order  string      `json:"order"`
	Amount money.Cents `json:"amount"`
	// Decision and Rule are read back from the decision log.
	Decision string `json:"decision"`
	Rule     string `json:"rule"`
	// Status is where the step ended (done, waiting_approval, denied).
	Status store.StepStatus `json:"status"`
	Why    string           `json:"why"`
}

// PolicyDecisions is section 1: six refund requests, each decided by a
// named rule of the active bundle.
type PolicyDecisions struct {
	Revision string        `json:"revision"`
	Rows     []DecisionRow `json:"rows"`
}

var decisionRequests = []struct {
	user, order string
	amount      money.Cents
	why         string
}{
	{"rep-ana", "O-1001", 3000, "within the auto limit, in the rep's region"},
	{"rep-ana", "O-1002", 12000, "over the $50.00 auto limit, under the maximum"},
	{"rep-ana", "O-1002", 60000, "over the $500.00 maximum"},
	{"rep-ana", "O-1003", 2000, "a US order for an EU rep"},
	{"rep-cy", "O-1003", 2000, "rep-cy never delegated the refund scope"},
	{"rep-ana", "O-1001", 15000, "more than the customer paid ($120.00)"},
}

// RunPolicyDecisions proposes each request in its own workflow on a stack
// in dir and reads the decisions back from the decision log.
func RunPolicyDecisions(ctx context.Context, dir string) (PolicyDecisions, error) {
	st, err := start(ctx, dir, setup{controls: Without()})
	if err != nil {
		return PolicyDecisions{}, err
	}
	defer st.Close()
	out := PolicyDecisions{Revision: st.Policy.Revision()}
	for i, r := range decisionRequests {
		wf := fmt.Sprintf("P%d", i+1)
		if err := st.open(ctx, r.user, wf); err != nil {
			return out, err
		}
		s, err := st.propose(ctx, r.user, wf, tool.IssueRefund, refundArgs(r.order, r.amount))
		if err != nil {
			return out, err
		}
		// The workflow's one step was decided once.
		log, err := st.Engine.Decisions(ctx, store.DecisionFilter{Workflow: wf}, 1)
		if err != nil {
			return out, err
		}
		if len(log.Decisions) == 0 {
			return out, fmt.Errorf("workflow %s: no decision in the decision log", wf)
		}
		d := log.Decisions[0]
		out.Rows = append(out.Rows, DecisionRow{User: r.user, Order: r.order, Amount: r.amount,
			Decision: d.Decision, Rule: d.Rule, Status: s.Status, Why: r.why})
	}
	return out, nil
}
