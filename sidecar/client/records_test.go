package client_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/countersign/countersign/sidecar/client"
)

// refunds opens workflows for rep-ana and proposes in them: W1 two small
// refunds (done), W2 a lookup and a refund that waits for a lead.
func refunds(t *testing.T, rep *client.Client) {
	t.Helper()
	ctx := context.Background()
	for wf, calls := range map[string][]struct {
		tool string
		args map[string]any
	}{
		"W1": {{"issue_refund", map[string]any{"order": "O-1001", "amount": 1000}}, {"issue_refund", map[string]any{"order": "O-1002", "amount": 2000}}},
		"W2": {{"lookup_order", map[string]any{"order": "O-1001"}}, {"issue_refund", map[string]any{"order": "O-1002", "amount": 12000}}},
	} {
		if _, _, err := rep.CreateWorkflow(ctx, client.NewWorkflow{ID: wf, Ticket: "T-" + wf}); err != nil {
			t.Fatal(err)
		}
		for _, c := range calls {
			if _, err := rep.ProposeStep(ctx, wf, c.tool, c.args); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// The decision log through the client: pages by cursor, the filters, and
// an export that reads every page.
func TestDecisionCalls(t *testing.T) {
	_, as := start(t)
	ctx := context.Background()
	began := time.Now().Add(-time.Second)
	refunds(t, as("rep-ana"))
	ops := as("ops-ida")

	first, err := ops.Decisions(ctx, client.DecisionQuery{Limit: 3})
	if err != nil || len(first.Decisions) != 3 || first.NextCursor == "" {
		t.Fatalf("first page: %+v, %v", first, err)
	}
	d := first.Decisions[0]
	if d.DecisionID == "" || d.Path == "" || len(d.Input) == 0 || d.Result.Decision != d.Decision || d.Bundles.Countersign.Revision != "p1" || d.Args.Order == "" {
		t.Errorf("a decision: %+v", d)
	}
	rest, err := ops.Decisions(ctx, client.DecisionQuery{Limit: 3, Cursor: first.NextCursor})
	if err != nil || len(rest.Decisions) != 1 || rest.NextCursor != "" || rest.Decisions[0].Seq <= first.Decisions[2].Seq {
		t.Fatalf("last page: %+v, %v", rest, err)
	}
	w2, err := as("lead-dee").Decisions(ctx, client.DecisionQuery{Workflow: "W2"})
	if err != nil || len(w2.Decisions) != 2 || w2.Decisions[1].Decision != "REQUIRE_APPROVAL" {
		t.Errorf("W2's decisions, read by a lead: %+v, %v", w2, err)
	}
	if p, err := ops.Decisions(ctx, client.DecisionQuery{Since: began, Until: time.Now().Add(time.Second)}); err != nil || len(p.Decisions) != 4 {
		t.Errorf("since the test began: %d decisions, %v; want 4", len(p.Decisions), err)
	}
	if p, err := ops.Decisions(ctx, client.DecisionQuery{Until: began}); err != nil || len(p.Decisions) != 0 {
		t.Errorf("until the test began: %+v, %v; want none", p.Decisions, err)
	}

	var all []client.Decision
	for d, err := range ops.ExportDecisions(ctx, client.DecisionQuery{Limit: 1}) {
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, d)
	}
	if len(all) != 4 || all[0].Seq != first.Decisions[0].Seq || all[3].Seq != rest.Decisions[0].Seq {
		t.Errorf("exported %d decisions, want the 4 in order", len(all))
	}
	n := 0 // a loop that stops early stops the reading (a sequence that went on would panic)
	for range ops.ExportDecisions(ctx, client.DecisionQuery{Limit: 1}) {
		if n++; n == 2 {
			break
		}
	}
	var failed error
	for _, err := range ops.ExportDecisions(ctx, client.DecisionQuery{Cursor: "not-a-cursor"}) {
		failed = err
	}
	apiError(t, failed, http.StatusBadRequest, "invalid_query")
	_, err = as("rep-ana").Decisions(ctx, client.DecisionQuery{})
	apiError(t, err, http.StatusForbidden, "forbidden_role")
}

// The audit log through the client: pages to the end, and the chain
// verifies.
func TestAuditCalls(t *testing.T) {
	_, as := start(t)
	ctx := context.Background()
	refunds(t, as("rep-ana"))
	ops := as("ops-ida")
	if _, err := ops.SetSwitch(ctx, "reship_order", false, "incident 7"); err != nil {
		t.Fatal(err)
	}

	var records []client.AuditRecord
	q := client.AuditQuery{Limit: 2}
	for {
		p, err := ops.Audit(ctx, q)
		if err != nil || len(p.Records) > 2 {
			t.Fatalf("a page after %q: %d records, %v", q.After, len(p.Records), err)
		}
		records = append(records, p.Records...)
		if p.Next == "" {
			break
		}
		q.After = p.Next
	}
	if len(records) < 3 {
		t.Fatalf("%d audit records", len(records))
	}
	for i, r := range records[1:] {
		if r.Prev != records[i].Hash || r.ID <= records[i].ID {
			t.Errorf("record %d (%s) does not follow %s", i+1, r.ID, records[i].ID)
		}
	}
	last := records[len(records)-1]
	if last.Actor != "ops-ida" || last.Detail["reason"] != "incident 7" {
		t.Errorf("the last record: %+v; want ops-ida's switch with its reason", last)
	}
	v, err := ops.VerifyAudit(ctx)
	if err != nil || !v.OK || v.Records != len(records) || v.Head != last.Hash || v.Broken != nil {
		t.Errorf("verify: %+v, %v; want ok over %d records, head %s", v, err, len(records), last.Hash)
	}
	_, err = ops.Audit(ctx, client.AuditQuery{After: "not-an-id"})
	apiError(t, err, http.StatusBadRequest, "invalid_query")
}

// Reconciliation through the client: none before the first run, then the
// report of a run and the same as the latest.
func TestReconciliationCalls(t *testing.T) {
	_, as := start(t)
	ctx := context.Background()
	ops := as("ops-ida")
	_, err := ops.LatestReconciliation(ctx)
	apiError(t, err, http.StatusNotFound, "not_found")

	refunds(t, as("rep-ana"))
	r, err := ops.Reconcile(ctx)
	if err != nil || r.Classes.Matched != 2 || r.Unexplained != 0 || r.AutoLimit != 5000 || r.Findings.AmountMismatch == nil ||
		r.Repairs.InFlightLedgerHasIt.Who != "countersign" || !r.Repairs.InFlightLedgerHasIt.Automatic {
		t.Fatalf("reconciliation: %+v, %v; want W1's two refunds matched, nothing unexplained", r, err)
	}
	latest, err := ops.LatestReconciliation(ctx)
	if err != nil || !latest.At.Equal(r.At) || latest.Classes != r.Classes {
		t.Errorf("latest: %+v, %v; want the run's report", latest, err)
	}
}
