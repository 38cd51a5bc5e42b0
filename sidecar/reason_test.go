package sidecar_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/countersign/countersign/cmd/devstack"
	"github.com/countersign/countersign/executor/credential"
	"github.com/countersign/countersign/executor/pgtest"
)

// explained is a step with what it says to the agent: the reason it did
// not run, the comment of a lead who rejected it, and the agent's own
// reason for it.
type explained struct {
	step
	Reason *struct {
		Text  string         `json:"text"`
		Facts map[string]any `json:"facts"`
		Next  string         `json:"next"`
	} `json:"reason"`
	ApprovalComment string `json:"approval_comment"`
	AgentReason     string `json:"agent_reason"`
	Error           *apiError
}

func (r reply) explained(t *testing.T) explained {
	t.Helper()
	var s explained
	r.decode(t, &s)
	return s
}

// stepsOf reads workflow wf as who, each step with what it says.
func (e *env) stepsOf(t *testing.T, who, wf string) []explained {
	t.Helper()
	var w struct {
		Steps []explained `json:"steps"`
	}
	e.call(t, http.MethodGet, "/v1/workflows/"+wf, who, nil).decode(t, &w)
	return w.Steps
}

// paid has a lead approve the refund step n of wf and resumes it, which
// pays it.
func (e *env) paid(t *testing.T, rep, lead, wf, order string, cents int64) {
	t.Helper()
	e.open(t, rep, wf)
	r, s := e.propose(t, rep, wf, "issue_refund", refund(order, cents))
	r.want(t, http.StatusAccepted, "")
	e.call(t, http.MethodPost, "/v1/approvals/"+s.Approval.ID+"/approve", lead, nil).want(t, http.StatusOK, "")
	if w := e.resume(t, rep, wf); w.Steps[0].Status != "done" {
		t.Fatalf("%s: step %s after approval, want done", wf, w.Steps[0].Status)
	}
}

// A denied answer names the fact that decided, with its numbers, and what
// can be done next; GET of the workflow says the same.
func TestDenialReasonNamesTheFact(t *testing.T) {
	e := start(t, devstack.Options{})
	// rep-ben refunds $80.00 on O-1003 ($50 + $30, each automatic),
	// leaving nothing.
	e.open(t, "rep-ben", "W-paid")
	e.propose(t, "rep-ben", "W-paid", "issue_refund", refund("O-1003", 5000))
	// rep-ana's day: $480.00 + $500.00 refunded with a lead's approval.
	e.sim(t, http.MethodPost, e.st.Endpoints.Orders+"/_sim/orders",
		map[string]any{"id": "O-2001", "region": "EU", "customer": "customer-9", "paid": 100000, "status": "shipped"}, http.StatusCreated)
	e.paid(t, "rep-ana", "lead-dee", "W-day1", "O-1002", 48000)
	e.paid(t, "rep-ana", "lead-dee", "W-day2", "O-2001", 50000)

	for _, tc := range []struct {
		name, who, wf, order string
		cents                int64
		rule, text, next     string
		facts                map[string]any
	}{
		{"an order of another region", "rep-ana", "W-region", "O-1003", 2000, "R2-order-outside-region",
			"order O-1003 is in region US; the rep's region is EU", "nothing: only a rep of region US acts on this order; hand the ticket to one",
			map[string]any{"order": "O-1003", "order_region": "US", "rep_region": "EU"}},
		{"more than is left of the amount paid", "rep-ben", "W-paid", "O-1003", 4000, "R4-exceeds-amount-paid",
			"$40.00 requested, $30.00 left of $80.00 paid", "a smaller amount, at most $30.00",
			map[string]any{"order": "O-1003", "requested": 4000.0, "paid": 8000.0, "refunded": 5000.0, "left": 3000.0}},
		{"over the rep's day", "rep-ana", "W-day3", "O-1001", 3000, "R5-rep-daily-cap",
			"rep's day: $980.00 of $1,000.00 used; $30.00 requested", "a smaller amount, at most $20.00",
			map[string]any{"requested": 3000.0, "rep_day": 98000.0, "rep_daily": 100000.0, "left": 2000.0, "window_seconds": 86400.0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.wf != "W-paid" {
				e.open(t, tc.who, tc.wf)
			}
			r, _ := e.propose(t, tc.who, tc.wf, "issue_refund", refund(tc.order, tc.cents))
			r.want(t, http.StatusForbidden, "policy_denied")
			for _, s := range []explained{r.explained(t), e.stepsOf(t, tc.who, tc.wf)[len(e.stepsOf(t, tc.who, tc.wf))-1]} {
				if s.Status != "denied" || s.Rule != tc.rule || s.Reason == nil {
					t.Fatalf("step %s by %s, reason %+v; want denied by %s with a reason", s.Status, s.Rule, s.Reason, tc.rule)
				}
				if s.Reason.Text != tc.text || s.Reason.Next != tc.next {
					t.Errorf("reason\n text %q\n next %q\nwant\n text %q\n next %q", s.Reason.Text, s.Reason.Next, tc.text, tc.next)
				}
				for k, v := range tc.facts {
					if s.Reason.Facts[k] != v {
						t.Errorf("facts[%s] = %v, want %v (facts %v)", k, s.Reason.Facts[k], v, s.Reason.Facts)
					}
				}
			}
		})
	}
}

// A waiting answer says what waits and that a lead decides; an allowed
// one carries no reason.
func TestWaitingAnswerHasAReason(t *testing.T) {
	e := start(t, devstack.Options{})
	e.open(t, "rep-ana", "W1")
	r, _ := e.propose(t, "rep-ana", "W1", "issue_refund", refund("O-1002", 12000))
	r.want(t, http.StatusAccepted, "")
	s := r.explained(t)
	if s.Reason == nil || s.Reason.Text != "$120.00 requested on order O-1002, $0.00 refunded before: above $50.00 in all on one order a lead approves" ||
		!strings.HasPrefix(s.Reason.Next, "ask a lead") || !strings.HasSuffix(s.Reason.Next, "or amend it to at most $50.00, which runs without one") ||
		s.Reason.Facts["refund_auto"] != 5000.0 {
		t.Errorf("waiting step's reason %+v", s.Reason)
	}
	ok, _ := e.propose(t, "rep-ana", "W1", "issue_refund", refund("O-1001", 2000))
	ok.want(t, http.StatusOK, "")
	if done := ok.explained(t); done.Reason != nil {
		t.Errorf("a done step carries a reason: %s", ok.body)
	}
}

// A lead's rejection reaches the agent: the comment is on the step at
// once, and the resume that ends the step denied says who rejected it
// and why.
func TestRejectionCommentReachesTheStep(t *testing.T) {
	e := start(t, devstack.Options{})
	e.open(t, "rep-ana", "W1")
	r, s := e.propose(t, "rep-ana", "W1", "issue_refund", refund("O-1002", 12000))
	r.want(t, http.StatusAccepted, "")
	const comment = "the bank already refunded the customer"
	e.call(t, http.MethodPost, "/v1/approvals/"+s.Approval.ID+"/reject", "lead-dee", map[string]string{"comment": comment}).want(t, http.StatusOK, "")
	if got := e.stepsOf(t, "rep-ana", "W1")[0]; got.ApprovalComment != comment {
		t.Errorf("before resume: approval_comment %q, want %q", got.ApprovalComment, comment)
	}
	var w struct {
		Steps []explained `json:"steps"`
	}
	e.call(t, http.MethodPost, "/v1/workflows/W1/resume", "rep-ana", nil).decode(t, &w)
	got := w.Steps[0]
	if got.Status != "denied" || got.ApprovalComment != comment || got.Reason == nil ||
		got.Reason.Text != `lead-dee rejected this call (approval `+s.Approval.ID+`): "`+comment+`"` ||
		!strings.HasPrefix(got.Reason.Next, "nothing: ") || got.Reason.Facts["comment"] != comment {
		t.Errorf("after resume: %+v, reason %+v", got, got.Reason)
	}
}

// The agent's reason for a call is kept on the step and on its approval,
// for the people who read them, and never reaches the policy's input; one
// over 500 characters, or on more than one line, is refused.
func TestAgentReasonRoundTrip(t *testing.T) {
	e := start(t, devstack.Options{})
	e.open(t, "rep-ana", "W1")
	const why = "customer says the parcel arrived crushed"
	body := map[string]any{"tool": "issue_refund", "args": refund("O-1002", 12000), "reason": why}
	r := e.call(t, http.MethodPost, "/v1/workflows/W1/steps", "rep-ana", body)
	r.want(t, http.StatusAccepted, "")
	s := r.explained(t)
	if s.AgentReason != why || e.stepsOf(t, "rep-ana", "W1")[0].AgentReason != why {
		t.Errorf("step agent_reason %q, want %q", s.AgentReason, why)
	}
	var a struct {
		AgentReason string `json:"agent_reason"`
	}
	e.call(t, http.MethodGet, "/v1/approvals/"+s.Approval.ID, "lead-dee", nil).decode(t, &a)
	if a.AgentReason != why {
		t.Errorf("approval agent_reason %q, want %q", a.AgentReason, why)
	}
	queued := e.queue(t, "lead-dee", "?status=pending")
	if _, ok := queued[s.Approval.ID]; !ok {
		t.Errorf("the approval is not in the queue")
	}
	d := e.call(t, http.MethodGet, "/v1/decisions?workflow=W1", "ops-ida", nil)
	d.want(t, http.StatusOK, "")
	if strings.Contains(string(d.body), "crushed") || !strings.Contains(string(d.body), "R7-refund-needs-approval") {
		t.Errorf("the decision log holds the agent's reason, or not the decision: %s", d.body)
	}

	for _, bad := range []string{strings.Repeat("é", 501), "two\nlines"} {
		body["reason"], body["args"] = bad, refund("O-1001", 1000)
		e.call(t, http.MethodPost, "/v1/workflows/W1/steps", "rep-ana", body).want(t, http.StatusUnprocessableEntity, "invalid_request")
	}
	body["reason"] = strings.Repeat("é", 500)
	e.call(t, http.MethodPost, "/v1/workflows/W1/steps", "rep-ana", body).want(t, http.StatusOK, "")
}

// An amended request is void at once, on either store: the lead's queue
// stops offering the old call and shows the new one before the agent
// resumes, and approving the old one is a conflict.
func TestAmendVoidsTheOldRequestAtOnce(t *testing.T) {
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
			e.open(t, "rep-ana", "W1")
			r, s := e.propose(t, "rep-ana", "W1", "issue_refund", refund("O-1002", 12000))
			r.want(t, http.StatusAccepted, "")
			old := s.Approval.ID
			if q := e.queue(t, "lead-dee", "?status=pending"); len(q) != 1 || q[old].ID != old {
				t.Fatalf("queue before the amendment: %v", q)
			}

			am := e.call(t, http.MethodPatch, "/v1/workflows/W1/steps/1", "rep-ana", map[string]any{"args": refund("O-1002", 11000)})
			am.want(t, http.StatusOK, "")
			amended := am.explained(t)
			if amended.Status != "waiting_approval" || amended.Approval == nil || amended.Approval.ID == old ||
				amended.Approval.Status != "pending" || amended.Reason == nil || !strings.HasPrefix(amended.Reason.Next, "ask a lead") {
				t.Fatalf("amend answered %s", am.body)
			}
			var q struct {
				Approvals []struct {
					ID       string         `json:"id"`
					Args     map[string]any `json:"args"`
					Replaces *struct {
						ID string `json:"id"`
					} `json:"replaces"`
				} `json:"approvals"`
			}
			e.call(t, http.MethodGet, "/v1/approvals?status=pending", "lead-dee", nil).decode(t, &q)
			if len(q.Approvals) != 1 || q.Approvals[0].ID != amended.Approval.ID || q.Approvals[0].Args["amount"] != float64(11000) ||
				q.Approvals[0].Replaces == nil || q.Approvals[0].Replaces.ID != old {
				t.Fatalf("queue after the amendment, before any resume: %+v; want only %s for $110.00, replacing %s", q, amended.Approval.ID, old)
			}
			var a approval
			e.call(t, http.MethodGet, "/v1/approvals/"+old, "lead-dee", nil).decode(t, &a)
			if a.Status != "void" {
				t.Errorf("old approval %s is %s, want void", old, a.Status)
			}
			e.call(t, http.MethodPost, "/v1/approvals/"+old+"/approve", "lead-dee", nil).want(t, http.StatusConflict, "not_pending")

			// The new request is the one that pays, once, for the amended amount.
			e.call(t, http.MethodPost, "/v1/approvals/"+amended.Approval.ID+"/approve", "lead-dee", nil).want(t, http.StatusOK, "")
			if w := e.resume(t, "rep-ana", "W1"); w.Steps[0].Status != "done" {
				t.Fatalf("after approving the new request: %s", w.Steps[0].Status)
			}
			if got := e.wantLedger(t, 1); got[0].Amount != 11000 {
				t.Errorf("ledger %+v, want one $110.00 refund", got)
			}
		})
	}
}

// An amendment the policy now allows runs at once, and one it denies is
// answered denied, with its reason: the old request is void either way.
func TestAmendDecidesAtOnce(t *testing.T) {
	e := start(t, devstack.Options{})
	e.open(t, "rep-ana", "W1")
	_, first := e.propose(t, "rep-ana", "W1", "issue_refund", refund("O-1002", 12000))
	_, second := e.propose(t, "rep-ana", "W1", "issue_refund", refund("O-1001", 9000))

	allowed := e.call(t, http.MethodPatch, "/v1/workflows/W1/steps/1", "rep-ana", map[string]any{"args": refund("O-1002", 4000)})
	allowed.want(t, http.StatusOK, "")
	if s := allowed.explained(t); s.Status != "done" || s.Reason != nil {
		t.Errorf("amended to $40.00: %s, want done without a reason", allowed.body)
	}
	denied := e.call(t, http.MethodPatch, "/v1/workflows/W1/steps/2", "rep-ana", map[string]any{"args": refund("O-1001", 13000)})
	denied.want(t, http.StatusOK, "")
	if s := denied.explained(t); s.Status != "denied" || s.Rule != "R4-exceeds-amount-paid" || s.Reason == nil ||
		s.Reason.Text != "$130.00 requested, $120.00 left of $120.00 paid" {
		t.Errorf("amended to $130.00: %s, want denied under R4 with its reason", denied.body)
	}
	for _, id := range []string{first.Approval.ID, second.Approval.ID} {
		var a approval
		e.call(t, http.MethodGet, "/v1/approvals/"+id, "lead-dee", nil).decode(t, &a)
		if a.Status != "void" {
			t.Errorf("approval %s is %s, want void", id, a.Status)
		}
	}
	if got := e.wantLedger(t, 1); got[0].Amount != 4000 {
		t.Errorf("ledger %+v, want the one $40.00 refund", got)
	}
}

// A reason is kept with its step: a restarted sidecar answers the same.
func TestReasonSurvivesARestart(t *testing.T) {
	dir := t.TempDir()
	first := start(t, devstack.Options{DataDir: dir})
	first.open(t, "rep-ana", "W1")
	r, _ := first.propose(t, "rep-ana", "W1", "issue_refund", refund("O-1003", 2000))
	before, _ := json.Marshal(r.explained(t).Reason)
	if err := first.st.Close(); err != nil {
		t.Fatal(err)
	}
	e := start(t, devstack.Options{DataDir: dir})
	after, _ := json.Marshal(e.stepsOf(t, "rep-ana", "W1")[0].Reason)
	if string(before) != string(after) || string(after) == "null" {
		t.Errorf("reason before the restart %s, after %s", before, after)
	}
}
