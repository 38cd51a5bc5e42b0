package demo

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/countersign/countersign/bundles"
	"github.com/countersign/countersign/bundles/loosen"
	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/tool"
)

// oneOperatorLoosening is issue 20's review: one operator uploads a
// bundle that keeps every limit of p1 and adds one rule, rep-ana's
// refunds of O-1002 from $450 need no lead, ahead of what was paid and her
// day's cap. It passes its tests and the gate, and no logged decision
// flips. Her agent then asks for $480 three times, a workflow each.
// Invariant: no refund over the auto limit is paid without a lead.
func oneOperatorLoosening(ctx context.Context, dir string, c engine.Controls) (Outcome, error) {
	st, err := start(ctx, dir, setup{controls: c})
	if err != nil {
		return Outcome{}, err
	}
	defer st.Close()
	archive, err := anaOnO1002()
	if err != nil {
		return Outcome{}, err
	}
	upload := "went live"
	_, _, actErr := st.Releases.Activate(ctx, archive, policy.Activation{By: "ops-ida"})
	switch {
	case errors.Is(actErr, policy.ErrAwaitingSecondOperator):
		upload = "waits for a second operator"
	case actErr != nil:
		return Outcome{}, fmt.Errorf("upload the rep-ana rule: %w", actErr)
	}
	var seen []string
	for i := range 3 {
		wf := fmt.Sprintf("L%d", i+1)
		if err := st.open(ctx, "rep-ana", wf); err != nil {
			return Outcome{}, err
		}
		s, err := st.propose(ctx, "rep-ana", wf, tool.IssueRefund, refundArgs("O-1002", 48000))
		if err != nil {
			return Outcome{}, err
		}
		seen = append(seen, outcomeOf(s))
	}
	refunds, err := st.refunds()
	if err != nil {
		return Outcome{}, err
	}
	var over int
	var paid money.Cents
	for _, e := range refunds {
		if money.Cents(e.Amount) > autoLimit {
			over++
			paid += money.Cents(e.Amount)
		}
	}
	return Outcome{Pass: over == 0, Evidence: fmt.Sprintf("the rule by one operator %s; $480.00 of O-1002 (paid $480.00) three times: %s; %s over %s without a lead (%s)",
		upload, strings.Join(seen, ", "), plural(over, "refund", "refunds"), autoLimit, paid)}, nil
}

// anaOnO1002 is p1 with the rule of issue 20's review added right after
// R3, as a .tar.gz.
func anaOnO1002() ([]byte, error) {
	fsys, err := bundles.Variant("p1", "p1-ana", loosen.AllowAnaOnO1002, nil)
	if err != nil {
		return nil, err
	}
	return policy.Build(fsys)
}
