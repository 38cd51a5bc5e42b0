package sidecar_test

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/countersign/countersign/cmd/devstack"
)

// An incident's worklist is compensated over HTTP: under a break-glass p2
// two refunds above $50 execute without approval; a lead ratifies one and
// reverses the other, under the approver rules, and reconciliation ends
// with nothing unexplained.
func TestCompensationOverHTTP(t *testing.T) {
	e := start(t, devstack.Options{})
	ops := http.Header{"Authorization": {"Bearer " + e.st.Tokens["ops-ida"]}, "Content-Type": {"application/gzip"}}
	e.send(t, http.MethodPost, "/v1/bundles?break_glass=true&reason=incident", ops, bytes.NewReader(buildBundle(t, "p2"))).want(t, http.StatusAccepted, "")
	e.call(t, http.MethodPost, "/v1/bundles/"+digestOf(t, "p2")+"/approve", "ops-jon", nil).want(t, http.StatusCreated, "")
	e.open(t, "rep-ana", "W1")
	for _, amount := range []int64{12000, 9000} {
		r, s := e.propose(t, "rep-ana", "W1", "issue_refund", refund("O-1002", amount))
		r.want(t, http.StatusOK, "")
		if s.Approval != nil {
			t.Fatalf("p2 asked for an approval: %+v", s)
		}
	}
	unexplained := func() map[string]int {
		var rep struct {
			Classes map[string]int `json:"classes"`
		}
		e.call(t, http.MethodPost, "/v1/reconciliations", "ops-ida", nil).decode(t, &rep)
		return rep.Classes
	}
	if c := unexplained(); c["refund_over_limit_without_approval"] != 2 {
		t.Fatalf("worklist before: %v", c)
	}

	e.call(t, http.MethodPost, "/v1/workflows/W1/steps/1/ratify", "rep-ana", nil).want(t, http.StatusForbidden, "forbidden_role")
	e.call(t, http.MethodPost, "/v1/workflows/W1/steps/1/ratify", "lead-eli", nil).want(t, http.StatusForbidden, "approver_outside_region")
	e.call(t, http.MethodPost, "/v1/workflows/W1/steps/1/ratify", "lead-dee", map[string]string{"comment": "damaged goods"}).want(t, http.StatusOK, "")
	e.call(t, http.MethodPost, "/v1/workflows/W1/steps/1/reverse", "lead-dee", nil).want(t, http.StatusConflict, "not_compensable")
	var s step
	r := e.call(t, http.MethodPost, "/v1/workflows/W1/steps/2/reverse", "lead-dee", nil)
	r.want(t, http.StatusOK, "")
	r.decode(t, &s)
	if s.Status != "compensated" {
		t.Fatalf("reversed step: %+v", s)
	}
	e.call(t, http.MethodPost, "/v1/workflows/W1/steps/9/reverse", "lead-dee", nil).want(t, http.StatusNotFound, "")

	c := unexplained()
	for class, n := range c {
		if class != "matched" && n != 0 {
			t.Errorf("after remediation %s = %d", class, n)
		}
	}
	entries, err := e.st.Ledger.Entries()
	if err != nil || len(entries) != 3 || entries[2].Kind != "reversal" || entries[2].Reverses != entries[1].ID {
		t.Fatalf("ledger after remediation: %+v %v", entries, err)
	}
}
