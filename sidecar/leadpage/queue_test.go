package leadpage_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/cmd/devstack"
	"github.com/countersign/countersign/executor/simclock"
)

// article is the part of a queue page that shows approval id, or "".
func article(body, id string) string {
	m := regexp.MustCompile(`(?s)<article[^>]*id="approval-` + regexp.QuoteMeta(id) + `".*?</article>`).FindString(body)
	return m
}

// section is the part of a queue page inside the section with id.
func section(body, id string) string {
	return regexp.MustCompile(`(?s)<section id="` + id + `">.*?</section>`).FindString(body)
}

// The queue shows each approval with what a lead decides on: the summary,
// the rule that asked, requester, ticket, the order's amount paid and the
// refunds already made, the time left and, after an amendment, the earlier
// call beside the new one. What this lead may not approve is shown apart
// with the reason.
func TestTheQueueShowsWhatALeadDecidesOn(t *testing.T) {
	clk := simclock.New(time.Now().UTC().Truncate(time.Second))
	st := stack(t, devstack.Options{Clock: clk})
	// A $10 refund runs without approval; the $350, amended to $400, needs one.
	if s, b := api(t, st, http.MethodPost, "/v1/workflows", "rep-ben", map[string]string{"id": "W0", "ticket": "T-0"}); s != http.StatusCreated {
		t.Fatalf("create W0: %d %s", s, b)
	}
	if s, b := api(t, st, http.MethodPost, "/v1/workflows/W0/steps", "rep-ben",
		map[string]any{"tool": "issue_refund", "args": map[string]any{"order": "O-1004", "amount": 1000}}); s != http.StatusOK {
		t.Fatalf("refund $10: %d %s", s, b)
	}
	first := requestRefund(t, st, "rep-ben", "W1", "O-1004", 35000)
	amended := amendRefund(t, st, "rep-ben", "W1", 1, "O-1004", 40000)
	if amended == first {
		t.Fatalf("the amended step still waits on %s", first)
	}
	clk.Advance(5 * time.Minute)
	other := requestRefund(t, st, "rep-ana", "W2", "O-1002", 30000)

	eli, _ := signedIn(t, st, "lead-eli")
	q := eli.get(t, "/approvals")
	q.want(t, http.StatusOK, "")
	mine := article(section(q.body, "mine"), amended)
	for _, want := range []string{
		"Refund $400.00 on order O-1004 for customer-4; requested by rep-ben; workflow W1",
		`<dd class="rule">R7-refund-needs-approval</dd>`,
		`<dd class="requester">rep-ben (US)</dd>`,
		`<dd class="ticket">T-W1</dd>`,
		`<dd class="customer">customer-4</dd>`,
		`<dd class="paid">$420.00</dd>`,
		`<dd class="refunded">$10.00</dd>`,
		`<dd class="left">10 min</dd>`,
		"New call</span> issue_refund $400.00 on order O-1004",
		"Earlier call (" + first + ", void)</span> issue_refund $350.00 on order O-1004",
		`formaction="/approvals/` + amended + `/approve"`,
		`formaction="/approvals/` + amended + `/reject"`,
	} {
		if !strings.Contains(mine, htmlEscape(want)) && !strings.Contains(mine, want) {
			t.Errorf("lead-eli's queue does not show %q in %s:\n%s", want, amended, mine)
		}
	}
	apart := article(section(q.body, "apart"), other)
	if !strings.Contains(apart, `data-code="approver_outside_region"`) || !strings.Contains(apart, "Another region: requested in EU, you approve for US.") {
		t.Errorf("rep-ana's EU request is not shown apart as another region's:\n%s", q.body)
	}
	if strings.Contains(apart, "<form") {
		t.Errorf("another region's request offers a form: %s", apart)
	}
	if article(q.body, first) != "" {
		t.Errorf("the voided approval %s is still listed", first)
	}

	fay, _ := signedIn(t, st, "lead-fay")
	q = fay.get(t, "/approvals")
	above := article(section(q.body, "apart"), amended)
	if !strings.Contains(above, `data-code="above_approver_limit"`) || !strings.Contains(above, "Above your limit: $400.00 is more than the $100.00 you may approve.") {
		t.Errorf("lead-fay's queue does not show %s apart as above her limit:\n%s", amended, q.body)
	}
	if strings.Contains(above, "/approve\"") || !strings.Contains(above, "/reject\"") {
		t.Errorf("above her limit lead-fay should be offered reject only: %s", above)
	}
	if !strings.Contains(q.body, "Nothing is waiting for your approval.") {
		t.Errorf("lead-fay's own queue is not empty: %s", section(q.body, "mine"))
	}

	ops := newBrowser(st.Endpoints.Sidecar, nil)
	ops.signIn(t, st.Tokens["ops-ida"])
	q = ops.get(t, "/approvals")
	if strings.Contains(q.body, "formaction=") || !strings.Contains(q.body, "see the queue read-only") ||
		article(q.body, amended) == "" || article(q.body, other) == "" {
		t.Errorf("an operator should see every approval read-only:\n%s", q.body)
	}
}
