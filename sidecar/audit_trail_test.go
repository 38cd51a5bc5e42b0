package sidecar_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/countersign/countersign/cmd/devstack"
)

// TestAuditTrailForAReviewer: approval and rejection comments, a switch
// change with its reason and an epoch raise are records of the hash chain,
// each with its actor, and the chain verifies.
func TestAuditTrailForAReviewer(t *testing.T) {
	e := start(t, devstack.Options{})
	e.open(t, "rep-ana", "W-review")
	_, s := e.propose(t, "rep-ana", "W-review", "issue_refund", refund("O-1002", 12000))
	_, s2 := e.propose(t, "rep-ana", "W-review", "issue_refund", refund("O-1001", 9000))
	if s.Approval == nil || s2.Approval == nil {
		t.Fatalf("steps %+v and %+v, want both waiting for approval", s, s2)
	}
	e.call(t, http.MethodPost, "/v1/approvals/"+s.Approval.ID+"/approve", "lead-dee",
		map[string]string{"comment": "customer sent photos of the damage"}).want(t, http.StatusOK, "")
	e.call(t, http.MethodPost, "/v1/approvals/"+s2.Approval.ID+"/reject", "lead-dee",
		map[string]string{"comment": "already refunded by phone"}).want(t, http.StatusOK, "")
	e.call(t, http.MethodPut, "/v1/switches/reship_order", "ops-ida",
		map[string]any{"enabled": false, "reason": "warehouse strike until Monday"}).want(t, http.StatusOK, "")
	e.call(t, http.MethodPut, "/v1/switches/reship_order", "ops-ida",
		map[string]any{"enabled": true, "reason": strings.Repeat("x", 1001)}).want(t, http.StatusUnprocessableEntity, "")
	e.call(t, http.MethodPost, "/v1/credentials/epoch", "ops-ida", nil).want(t, http.StatusOK, "")

	var page struct {
		Records []struct {
			Kind   string         `json:"kind"`
			Actor  string         `json:"actor"`
			Tool   string         `json:"tool"`
			Detail map[string]any `json:"detail"`
		} `json:"records"`
	}
	e.call(t, http.MethodGet, "/v1/audit?limit=1000", "ops-ida", nil).decode(t, &page)
	want := map[string]bool{
		"approval lead-dee approved customer sent photos of the damage": false,
		"approval lead-dee rejected already refunded by phone":          false,
		"switch ops-ida false warehouse strike until Monday":            false,
	}
	epoch := false
	for _, r := range page.Records {
		switch r.Kind {
		case "approval":
			if c, ok := r.Detail["comment"]; ok {
				want[strings.Join([]string{r.Kind, r.Actor, toString(r.Detail["status"]), toString(c)}, " ")] = true
			}
		case "switch":
			if reason, ok := r.Detail["reason"]; ok {
				want[strings.Join([]string{r.Kind, r.Actor, toString(r.Detail["enabled"]), toString(reason)}, " ")] = true
			}
		case "epoch":
			epoch = epoch || r.Actor == "ops-ida"
		}
	}
	for rec, seen := range want {
		if !seen {
			t.Errorf("no audit record %q in the chain", rec)
		}
	}
	if !epoch {
		t.Error("no epoch record by ops-ida in the chain")
	}
	var verify struct {
		OK bool `json:"ok"`
	}
	e.call(t, http.MethodGet, "/v1/audit/verify", "ops-ida", nil).decode(t, &verify)
	if !verify.OK {
		t.Error("the audit chain does not verify")
	}
}

func toString(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case bool:
		if v {
			return "true"
		}
		return "false"
	}
	return ""
}

// TestAuditQueryRefusals: a limit or an after cursor that does not parse
// is refused as the decision log refuses its own, naming the parameter.
func TestAuditQueryRefusals(t *testing.T) {
	e := start(t, devstack.Options{})
	for _, tc := range []struct {
		query string
		names string
	}{
		{"limit=0", "limit"},
		{"limit=-1", "limit"},
		{"limit=1001", "limit"},
		{"limit=ten", "limit"},
		{"after=W1", "after"},
		{"after=%00", "after"},
	} {
		t.Run(tc.query, func(t *testing.T) {
			r := e.call(t, http.MethodGet, "/v1/audit?"+tc.query, "ops-ida", nil)
			r.want(t, http.StatusBadRequest, "invalid_query")
			if msg := r.errorOf(t).Message; !strings.HasPrefix(msg, tc.names+":") {
				t.Errorf("message %q does not name %s", msg, tc.names)
			}
		})
	}
	e.call(t, http.MethodPost, "/v1/credentials/epoch", "ops-ida", nil).want(t, http.StatusOK, "") // a second record
	var page struct {
		Records []struct {
			ID string `json:"id"`
		} `json:"records"`
		Next string `json:"next"`
	}
	r := e.call(t, http.MethodGet, "/v1/audit?limit=1", "ops-ida", nil)
	r.want(t, http.StatusOK, "")
	r.decode(t, &page)
	if len(page.Records) != 1 || page.Next != page.Records[0].ID {
		t.Fatalf("limit=1: %+v, want one record and next naming it", page)
	}
	e.call(t, http.MethodGet, "/v1/audit?after="+page.Next, "ops-ida", nil).want(t, http.StatusOK, "")
}
