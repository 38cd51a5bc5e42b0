package sidecar_test

import (
	"maps"
	"net/http"
	"slices"
	"testing"

	"github.com/countersign/countersign/cmd/devstack"
	"github.com/countersign/countersign/executor/credential"
	"github.com/countersign/countersign/executor/pgtest"
)

// GET /v1/approvals?approver= lists what that lead decided, whatever
// became of it since (a used approval stays theirs), and ?requester= what
// that rep's calls asked for; both compare ids as same-person checks do,
// combine with status, and refuse an id no token could carry. The same on
// bbolt and on PostgreSQL.
func TestApprovalsFilterByApproverAndRequester(t *testing.T) {
	for _, backend := range []string{"bbolt", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			o := devstack.Options{}
			if backend == "postgres" {
				kek, err := credential.NewKeyEncryptionKey()
				if err != nil {
					t.Fatal(err)
				}
				o.StoreURL, o.KeyEncryptionKey = pgtest.URL(t), kek
			}
			e := start(t, o)
			ask := func(who, wf, order string, cents int64) string {
				e.open(t, who, wf)
				r, s := e.propose(t, who, wf, "issue_refund", refund(order, cents))
				r.want(t, http.StatusAccepted, "")
				return s.Approval.ID
			}
			used := ask("rep-ben", "W-used", "O-1004", 40000)
			rejected := ask("rep-ben", "W-rejected", "O-1003", 6000)
			pending := ask("rep-ben", "W-pending", "O-1004", 30000)
			dees := ask("rep-ana", "W-dee", "O-1002", 30000)
			e.call(t, http.MethodPost, "/v1/approvals/"+used+"/approve", "lead-eli", nil).want(t, http.StatusOK, "")
			e.call(t, http.MethodPost, "/v1/approvals/"+rejected+"/reject", "lead-eli", nil).want(t, http.StatusOK, "")
			e.call(t, http.MethodPost, "/v1/approvals/"+dees+"/approve", "lead-dee", nil).want(t, http.StatusOK, "")
			if w := e.resume(t, "rep-ben", "W-used"); w.Steps[0].Status != "done" {
				t.Fatalf("W-used after its approval: step %s, want done", w.Steps[0].Status)
			}

			for _, c := range []struct {
				who, query string
				want       []string
			}{
				{"lead-eli", "?approver=lead-eli", []string{used, rejected}},
				{"lead-eli", "?approver=LEAD-ELI", []string{used, rejected}},
				{"ops-ida", "?approver=lead-eli&status=used", []string{used}},
				{"lead-eli", "?approver=lead-eli&status=rejected", []string{rejected}},
				{"lead-eli", "?approver=lead-eli&status=pending", nil},
				{"lead-eli", "?approver=lead-dee", []string{dees}},
				{"lead-eli", "?requester=rep-ben", []string{used, rejected, pending}},
				{"lead-eli", "?requester=Rep-Ben&status=pending", []string{pending}},
				{"lead-eli", "?requester=rep-ana&all=true", []string{dees}},
				{"lead-eli", "?requester=rep-ana&approver=lead-eli", nil},
			} {
				got := slices.Sorted(maps.Keys(e.queue(t, c.who, c.query)))
				if want := slices.Sorted(slices.Values(c.want)); !slices.Equal(got, want) {
					t.Errorf("%s GET /v1/approvals%s: %v, want %v", c.who, c.query, got, want)
				}
			}
			for _, q := range []string{"?approver=lead%20eli", "?requester=%00"} {
				e.call(t, http.MethodGet, "/v1/approvals"+q, "lead-eli", nil).want(t, http.StatusBadRequest, "invalid_query")
			}
		})
	}
}
