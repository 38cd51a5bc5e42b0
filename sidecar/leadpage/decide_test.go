package leadpage_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/countersign/countersign/cmd/devstack"
)

// signedIn is a browser signed in as person who and the CSRF token of its
// session.
func signedIn(t *testing.T, st *devstack.Stack, who string) (*browser, string) {
	t.Helper()
	b := newBrowser(st.Endpoints.Sidecar, nil)
	b.signIn(t, st.Tokens[who])
	return b, b.get(t, "/approvals").csrf(t)
}

// A refused approval or rejection on the page answers the API's status and
// shows the API's code and message for the same attempt, and changes
// nothing.
func TestRefusalsAreTheAPIs(t *testing.T) {
	st := stack(t, devstack.Options{})
	id := requestRefund(t, st, "rep-ben", "W1", "O-1004", 40000)
	for _, tc := range []struct {
		name, who, verb, id, comment string
		status                       int
		code                         string
	}{
		{"a lead whose limit is below the amount approves", "lead-fay", "approve", id, "", http.StatusForbidden, "above_approver_limit"},
		{"a lead of another region approves", "lead-dee", "approve", id, "", http.StatusForbidden, "approver_outside_region"},
		{"a lead of another region rejects", "lead-dee", "reject", id, "", http.StatusForbidden, "approver_outside_region"},
		{"an operator approves", "ops-ida", "approve", id, "", http.StatusForbidden, "forbidden_role"},
		{"a lead approves an approval that does not exist", "lead-eli", "approve", "A-404", "", http.StatusNotFound, "not_found"},
		{"a lead comments on two lines", "lead-eli", "approve", id, "fine\nby me", http.StatusUnprocessableEntity, "invalid_request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, body := api(t, st, http.MethodPost, "/v1/approvals/"+tc.id+"/"+tc.verb, tc.who, map[string]string{"comment": tc.comment})
			var e struct {
				Error struct{ Code, Message string }
			}
			if err := json.Unmarshal(body, &e); err != nil || s != tc.status || e.Error.Code != tc.code {
				t.Fatalf("the API answers %d %s, want %d %s", s, body, tc.status, tc.code)
			}
			b, csrf := signedIn(t, st, tc.who)
			p := b.post(t, "/approvals/"+tc.id+"/"+tc.verb, url.Values{"csrf": {csrf}, "comment": {tc.comment}})
			p.want(t, tc.status, tc.code)
			if !strings.Contains(p.body, htmlEscape(e.Error.Message)) {
				t.Errorf("the page does not show the API's message %q: %s", e.Error.Message, p.body)
			}
		})
	}
	if s, _, _ := approvalStatus(t, st, id); s != "pending" {
		t.Fatalf("after refused attempts approval %s is %s, want pending", id, s)
	}

	eli, csrf := signedIn(t, st, "lead-eli")
	p := eli.post(t, "/approvals/"+id+"/approve", url.Values{"csrf": {csrf}, "comment": {"customer called twice"}})
	if p.status != http.StatusSeeOther || p.location() != "/approvals" {
		t.Fatalf("approve answered %d to %q, want 303 to /approvals: %s", p.status, p.location(), p.body)
	}
	if s, by, c := approvalStatus(t, st, id); s != "approved" || by != "lead-eli" || c != "customer called twice" {
		t.Fatalf("approval %s: %s by %q with %q, want approved by lead-eli with the comment", id, s, by, c)
	}
	q := eli.get(t, "/approvals")
	if !strings.Contains(q.body, `id="notice"`) || !strings.Contains(q.body, "Approved "+id) {
		t.Errorf("the queue does not say what was approved: %s", q.body)
	}
	if strings.Contains(q.body, `id="approval-`+id+`"`) {
		t.Errorf("approval %s is still in the queue", id)
	}
	if again := eli.get(t, "/approvals"); strings.Contains(again.body, `id="notice"`) {
		t.Errorf("the notice is shown twice")
	}
	eli.post(t, "/approvals/"+id+"/approve", url.Values{"csrf": {csrf}}).want(t, http.StatusConflict, "not_pending")
}

// A lead may reject what is above their own limit, on the page as in the
// API.
func TestALeadRejectsAboveTheirLimit(t *testing.T) {
	st := stack(t, devstack.Options{})
	id := requestRefund(t, st, "rep-ben", "W1", "O-1004", 40000)
	fay, csrf := signedIn(t, st, "lead-fay")
	p := fay.post(t, "/approvals/"+id+"/reject", url.Values{"csrf": {csrf}, "comment": {"not without the receipt"}})
	if p.status != http.StatusSeeOther {
		t.Fatalf("reject answered %d: %s", p.status, p.body)
	}
	if s, by, _ := approvalStatus(t, st, id); s != "rejected" || by != "lead-fay" {
		t.Fatalf("approval %s: %s by %q, want rejected by lead-fay", id, s, by)
	}
	if q := fay.get(t, "/approvals"); !strings.Contains(q.body, "Rejected "+id) {
		t.Errorf("the queue does not say what was rejected: %s", q.body)
	}
}

// htmlEscape is how html/template writes text: what the page shows.
func htmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;").Replace(s)
}
