package leadpage_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/cmd/devstack"
	"github.com/countersign/countersign/executor/simclock"
)

// ids are the approvals a page's section shows, in order.
func ids(body, section string) []string {
	var out []string
	for _, part := range strings.Split(sectionOf(body, section), `<article class="approval`)[1:] {
		_, rest, _ := strings.Cut(part, `id="approval-`)
		id, _, _ := strings.Cut(rest, `"`)
		out = append(out, id)
	}
	return out
}

// sectionOf is the section with id, up to the next section or the end of
// the queue.
func sectionOf(body, id string) string {
	_, rest, ok := strings.Cut(body, `<section id="`+id+`">`)
	if !ok {
		return ""
	}
	s, _, _ := strings.Cut(rest, "</section>")
	return s
}

// A card shows what the lead decides on beyond the call: the policy
// revision and digest that asked, what is still refundable on the order,
// the rep's day when it asked and the refunds already on the order; its
// buttons name the request, and its comment box has a visible label.
func TestACardShowsTheFactsThatAsked(t *testing.T) {
	st := stack(t, devstack.Options{})
	if s, b := api(t, st, http.MethodPost, "/v1/workflows", "rep-ben", map[string]string{"id": "W0", "ticket": "T-0"}); s != http.StatusCreated {
		t.Fatalf("create W0: %d %s", s, b)
	}
	if s, b := api(t, st, http.MethodPost, "/v1/workflows/W0/steps", "rep-ben",
		map[string]any{"tool": "issue_refund", "args": map[string]any{"order": "O-1004", "amount": 2000}}); s != http.StatusOK {
		t.Fatalf("refund $20: %d %s", s, b)
	}
	id := requestRefundBecause(t, st, "rep-ben", "W1", "O-1004", 30000, "the parcel arrived <crushed> & wet")
	var active struct{ Revision, Digest string }
	if s, b := api(t, st, http.MethodGet, "/v1/bundles/active", "ops-ida", nil); s != http.StatusOK || json.Unmarshal(b, &active) != nil {
		t.Fatalf("the active bundle: %d %s", s, b)
	}

	b, _ := signedIn(t, st, "lead-eli")
	card := article(b.get(t, "/approvals").body, id)
	for _, want := range []string{
		"revision <code>" + active.Revision + "</code>", `title="` + active.Digest + `"`,
		`<dd class="refundable">$400.00</dd>`, // $420.00 paid, $20.00 refunded
		`<dd class="repday">$20.00 refunded in the rolling day when asked</dd>`,
		"<li>$20.00 · W0 step 1 · rep-ben · ",
		`aria-label="Approve refund of $300.00 on O-1004 for rep-ben"`, `aria-label="Reject refund of $300.00 on O-1004 for rep-ben"`,
		`<label for="comment-` + id + `">Comment`, `id="comment-` + id + `" name="comment"`,
		"<h4>Agent's stated reason</h4><p>the parcel arrived &lt;crushed&gt; &amp; wet</p>",
	} {
		if !strings.Contains(card, want) {
			t.Errorf("the card does not show %q:\n%s", want, card)
		}
	}
}

// "Decided by me" lists what this lead approved or rejected and what
// became of it; the queue filters by status, region and rep and sorts by
// time left; a decision comes back to the view it was made from.
func TestViewsAndFilters(t *testing.T) {
	clk := simclock.New(time.Now().UTC().Truncate(time.Second))
	st := stack(t, devstack.Options{Clock: clk})
	first := requestRefund(t, st, "rep-ben", "W1", "O-1004", 40000)
	clk.Advance(time.Minute)
	second := requestRefund(t, st, "rep-ben", "W2", "O-1003", 6000)
	clk.Advance(time.Minute)
	eu := requestRefund(t, st, "rep-ana", "W3", "O-1002", 30000)
	b, csrf := signedIn(t, st, "lead-eli")

	for _, c := range []struct {
		query, section string
		want           []string
	}{
		{"", "mine", []string{first, second}},
		{"", "apart", []string{eu}},
		{"?sort=newest", "mine", []string{second, first}},
		{"?sort=time_left", "mine", []string{first, second}},
		{"?region=eu", "apart", []string{eu}},
		{"?region=EU", "mine", nil},
		{"?rep=rep-ana", "apart", []string{eu}},
		{"?rep=Rep-Ben", "mine", []string{first, second}},
		{"?rep=rep-ben", "apart", nil},
		{"?status=approved", "mine", nil},
	} {
		if got := ids(b.get(t, "/approvals"+c.query).body, c.section); strings.Join(got, ",") != strings.Join(c.want, ",") {
			t.Errorf("/approvals%s: %s shows %v, want %v", c.query, c.section, got, c.want)
		}
	}

	p := b.post(t, "/approvals/"+first+"/approve", url.Values{"csrf": {csrf}, "back": {"view=decided&rep=rep-ben"}})
	if p.status != http.StatusSeeOther || p.location() != "/approvals?rep=rep-ben&view=decided" {
		t.Errorf("approving from a filtered view answered %d to %q, want 303 back to it", p.status, p.location())
	}
	b.post(t, "/approvals/"+second+"/reject", url.Values{"csrf": {csrf}, "comment": {"no receipt"}}).want(t, http.StatusSeeOther, "")
	if s, body := api(t, st, http.MethodPost, "/v1/workflows/W1/resume", "rep-ben", nil); s != http.StatusOK || !strings.Contains(string(body), `"status":"done"`) {
		t.Fatalf("resume W1 after its approval: %d %s", s, body)
	}
	dee, deeCSRF := signedIn(t, st, "lead-dee")
	dee.post(t, "/approvals/"+eu+"/approve", url.Values{"csrf": {deeCSRF}}).want(t, http.StatusSeeOther, "")

	decided := b.get(t, "/approvals?view=decided").body
	if got := ids(decided, "closed"); strings.Join(got, ",") != second+","+first {
		t.Errorf("decided by lead-eli, latest first: %v, want [%s %s]", got, second, first)
	}
	for id, want := range map[string]string{
		first:  "Approved by you; used: the step ran with it.",
		second: "Rejected by you.",
	} {
		if card := article(decided, id); !strings.Contains(card, want) || strings.Contains(card, `class="decide"`) {
			t.Errorf("decided card %s does not say %q, or still has buttons:\n%s", id, want, card)
		}
	}
	if !strings.Contains(article(decided, second), "no receipt") {
		t.Errorf("the rejected card does not show the comment: %s", article(decided, second))
	}
	if got := ids(b.get(t, "/approvals?view=decided&status=used").body, "closed"); strings.Join(got, ",") != first {
		t.Errorf("decided and used: %v, want [%s]", got, first)
	}
	if got := ids(b.get(t, "/approvals?status=any").body, "closed"); len(got) != 3 {
		t.Errorf("every status: %v no longer pending, want all three", got)
	}
}

// The queue's script refreshes it from /approvals/fragment: 304 while
// nothing changed, the new body once something did. The script is a file
// of this origin, which the CSP allows, and no inline script is.
func TestTheQueueRefreshesFromAFragment(t *testing.T) {
	st := stack(t, devstack.Options{})
	b, _ := signedIn(t, st, "lead-eli")
	page := b.get(t, "/approvals")
	csp := page.header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "connect-src 'self'") || strings.Contains(csp, "unsafe") {
		t.Errorf("Content-Security-Policy %q, want script-src 'self' and connect-src 'self', nothing unsafe", csp)
	}
	if !strings.Contains(page.body, `<script src="/approvals/page.js" defer></script>`) || strings.Contains(page.body, "<script>") {
		t.Errorf("the page does not load its script from a file, or has an inline one")
	}
	js := b.get(t, "/approvals/page.js")
	if js.status != http.StatusOK || !strings.HasPrefix(js.header.Get("Content-Type"), "text/javascript") || !strings.Contains(js.body, "/approvals/fragment") {
		t.Errorf("GET /approvals/page.js: %d %q", js.status, js.header.Get("Content-Type"))
	}

	frag := b.get(t, "/approvals/fragment?sort=time_left")
	etag := frag.header.Get("ETag")
	if frag.status != http.StatusOK || etag == "" || !strings.HasPrefix(frag.body, `<div id="queue" data-fragment="/approvals/fragment?sort=time_left"`) {
		t.Fatalf("the fragment: %d, ETag %q: %s", frag.status, etag, frag.body)
	}
	req, _ := http.NewRequest(http.MethodGet, st.Endpoints.Sidecar+"/approvals/fragment?sort=time_left", nil)
	req.Header.Set("If-None-Match", etag)
	for _, c := range b.cookies {
		req.AddCookie(c)
	}
	res, err := b.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNotModified {
		t.Errorf("the same fragment again with If-None-Match: %d, want 304", res.StatusCode)
	}
	id := requestRefund(t, st, "rep-ben", "W1", "O-1004", 40000)
	if again := b.get(t, "/approvals/fragment?sort=time_left"); again.header.Get("ETag") == etag || article(again.body, id) == "" {
		t.Errorf("after a new request the fragment is unchanged or lacks %s", id)
	}
	signedOut := newBrowser(st.Endpoints.Sidecar, nil)
	if p := signedOut.get(t, "/approvals/fragment"); p.status != http.StatusSeeOther {
		t.Errorf("the fragment without a session: %d, want 303 to sign in", p.status)
	}
}
