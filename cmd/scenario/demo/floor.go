package demo

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/countersign/countersign/bundles"
	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/tool"
)

// approvalRoleFloor: two operators activate a bundle whose approver rules
// also accept rep-ana, a rule aimed at one person that the gate's fixed
// approvers never meet. rep-ben asks for $300 on O-1004, rep-ana approves
// it on the API with her own token, and rep-ben's agent resumes.
// Invariant: her approval is refused and nothing is refunded, whatever
// the bundle says.
func approvalRoleFloor(ctx context.Context, dir string, c engine.Controls) (Outcome, error) {
	st, err := start(ctx, dir, setup{controls: c})
	if err != nil {
		return Outcome{}, err
	}
	defer st.Close()
	b, err := repApproverBundle("rep-ana")
	if err != nil {
		return Outcome{}, err
	}
	// Proposed by one operator and approved by another, as a change of
	// rules needs: the floor must hold under a bundle that went live by
	// the book.
	if _, err := st.Releases.ActivateBundle(ctx, b, policy.Activation{By: "ops-jon", Proposer: "ops-ida"}); err != nil {
		return Outcome{}, fmt.Errorf("activate %s: %w", b.Revision(), err)
	}
	if err := st.open(ctx, "rep-ben", "W1"); err != nil {
		return Outcome{}, err
	}
	s, err := st.propose(ctx, "rep-ben", "W1", tool.IssueRefund, refundArgs("O-1004", 30000))
	if err != nil {
		return Outcome{}, err
	}
	if s.Approval == "" {
		return Outcome{}, fmt.Errorf("the $300 refund is %s (%s), not waiting for an approval", s.Status, s.Rule)
	}
	status, body, err := st.post(ctx, "rep-ana", "/v1/approvals/"+s.Approval+"/approve", map[string]string{"comment": "looks fine"})
	if err != nil {
		return Outcome{}, err
	}
	approve := "approved"
	if status != http.StatusOK {
		approve = fmt.Sprintf("%d %s", status, errorCode(body))
	}
	snap, err := st.Engine.Resume(ctx, person("rep-ben"), "W1")
	if err != nil {
		return Outcome{}, fmt.Errorf("resume W1: %w", err)
	}
	refunds, err := st.refunds()
	if err != nil {
		return Outcome{}, err
	}
	return Outcome{Pass: status != http.StatusOK && len(refunds) == 0,
		Evidence: fmt.Sprintf("rep-ana approves rep-ben's $300 refund under %s: %s; after the resume the step is %s, %s",
			b.Revision(), approve, snap.Steps[0].Status, plural(len(refunds), "ledger entry", "ledger entries"))}, nil
}

// repApproverBundle is p1 whose approver rules allow every approval by
// the people ids name, whatever their role, region or limit, before any
// other approver rule; the call rules, the data and the tests are p1's.
// It passes the gate, whose approver cases name other people: the bundle
// is the hole the approval floor closes (issue 20, item 2).
func repApproverBundle(ids ...string) (*policy.Bundle, error) {
	fsys, err := bundles.Variant("p1", "p1-"+strings.Join(ids, "-")+"-approves", func(src string) string { return src }, nil)
	if err != nil {
		return nil, err
	}
	const first = `verdict := refused("requester_cannot_approve") if {`
	f := fsys["approver/approver.rego"]
	src := string(f.Data)
	if !strings.Contains(src, first) {
		return nil, fmt.Errorf("p1's approver rules no longer start with %q", first)
	}
	quoted := make([]string, len(ids))
	for i, id := range ids {
		quoted[i] = fmt.Sprintf("%q", id)
	}
	f.Data = []byte(strings.Replace(src, first, fmt.Sprintf(`verdict := {"allowed": true} if {
	input.approver.id in {%s}
} else := refused("requester_cannot_approve") if {`, strings.Join(quoted, ", ")), 1))
	return policy.LoadFS(fsys)
}
