package leadpage_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/bundles"
	"github.com/countersign/countersign/cmd/devstack"
	"github.com/countersign/countersign/executor/fixture"
	"github.com/countersign/countersign/executor/policy"
)

// activateApprovers makes p1 the active bundle with approver rules that
// allow anyone ids names, whatever their role, region or limit (issue
// 20's second hole), proposed and approved by two operators.
func activateApprovers(t *testing.T, st *devstack.Stack, ids ...string) {
	t.Helper()
	fsys, err := bundles.Variant("p1", "p1-approvers", func(s string) string { return s }, nil)
	if err != nil {
		t.Fatal(err)
	}
	const first = `verdict := refused("requester_cannot_approve") if {`
	f := fsys["approver/approver.rego"]
	if !bytes.Contains(f.Data, []byte(first)) {
		t.Fatalf("p1's approver rules no longer start with %s", first)
	}
	quoted, _ := json.Marshal(ids)
	f.Data = bytes.Replace(f.Data, []byte(first), fmt.Appendf(nil,
		"verdict := {\"allowed\": true} if {\n\tinput.approver.id in %s\n} else := %s", quoted, strings.TrimPrefix(first, "verdict := ")), 1)
	b, err := policy.LoadFS(fsys)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Releases.ActivateBundle(context.Background(), b, policy.Activation{By: "ops-jon", Proposer: "ops-ida"}); err != nil {
		t.Fatalf("activate %s: %v", b.Revision(), err)
	}
}

// The page decides as the API does, floor included: under a bundle whose
// approver rules accept rep-ana and ops-ida, the operator signed in on
// the page can neither approve nor reject rep-ben's $300 refund, rep-ana
// cannot sign in at all, and a lead token for Rep-Ana cannot approve
// rep-ana's own call. Nothing is paid.
func TestThePageKeepsTheApprovalFloor(t *testing.T) {
	st := stack(t, devstack.Options{})
	activateApprovers(t, st, "rep-ana", "ops-ida")
	ben := requestRefund(t, st, "rep-ben", "W-ben", "O-1004", 30000)
	ana := requestRefund(t, st, "rep-ana", "W-ana", "O-1002", 12000)

	ops, csrf := signedIn(t, st, "ops-ida")
	for _, verb := range []string{"approve", "reject"} {
		ops.post(t, "/approvals/"+ben+"/"+verb, url.Values{"csrf": {csrf}, "comment": {"fine"}}).want(t, http.StatusForbidden, "forbidden_role")
	}
	if q := ops.get(t, "/approvals"); !strings.Contains(article(q.body, ben), "<code>forbidden_role</code>") {
		t.Errorf("the operator's queue does not say forbidden_role for %s: %s", ben, article(q.body, ben))
	}

	rep := newBrowser(st.Endpoints.Sidecar, nil)
	csrfLogin := rep.get(t, "/login").csrf(t)
	rep.post(t, "/login", url.Values{"csrf": {csrfLogin}, "token": {st.Tokens["rep-ana"]}}).want(t, http.StatusForbidden, "forbidden_role")

	dee, _ := fixture.PersonByID("lead-dee")
	dee.ID = "Rep-Ana"
	tok, err := st.IdP.Sign(dee, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	herself := newBrowser(st.Endpoints.Sidecar, nil)
	herself.signIn(t, tok)
	csrf = herself.get(t, "/approvals").csrf(t)
	herself.post(t, "/approvals/"+ana+"/approve", url.Values{"csrf": {csrf}}).want(t, http.StatusForbidden, "requester_cannot_approve")

	for wf, who := range map[string]string{"W-ben": "rep-ben", "W-ana": "rep-ana"} {
		if s, b := api(t, st, http.MethodPost, "/v1/workflows/"+wf+"/resume", who, nil); s != http.StatusOK || !strings.Contains(string(b), `"status":"waiting_approval"`) {
			t.Errorf("resume %s: %d %s, want it still waiting for an approval", wf, s, b)
		}
	}
	for _, id := range []string{ben, ana} {
		if s, by, _ := approvalStatus(t, st, id); s != "pending" || by != "" {
			t.Errorf("approval %s is %s by %q, want pending", id, s, by)
		}
	}
	res, err := http.Get(st.Endpoints.Ledger + "/entries")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var ledger struct{ Entries []json.RawMessage }
	if err := json.NewDecoder(res.Body).Decode(&ledger); err != nil || len(ledger.Entries) != 0 {
		t.Errorf("ledger %v (%v), want no entry", ledger.Entries, err)
	}
}
