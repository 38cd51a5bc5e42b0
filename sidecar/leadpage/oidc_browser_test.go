package leadpage_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/accessibility"
	"github.com/chromedp/chromedp"

	"github.com/countersign/countersign/cmd/devstack"
)

// waitFor waits until expression, a JavaScript predicate, holds on the
// page: the refresh of the queue is the page's own doing, so the test
// waits on what it shows, never for a fixed time.
func waitFor(ctx context.Context, what, expression string) error {
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expression, chromedp.WithPollingTimeout(25*time.Second))); err != nil {
		return fmt.Errorf("waiting for %s: %w", what, err)
	}
	return nil
}

// A lead signs in through the identity provider by a real redirect,
// sees a request appear in the queue without reloading, approves it with
// the button that names it, finds it under "Decided by me", and sees
// there, again without reloading, that the step ran with it.
func TestALeadSignsInThroughTheProviderAndDecidesInChromium(t *testing.T) {
	bin := chromium()
	if bin == "" {
		t.Skip("chromium is not installed (/usr/bin/chromium or on PATH); bash .ci/run installs it and runs this test")
	}
	st := stack(t, devstack.Options{})
	base := st.Endpoints.Sidecar
	ctx := within(t, newChromium(t, bin))

	err := chromedp.Do(ctx, chromedp.Navigate(base+"/approvals"), chromedp.WaitVisible(chromedp.ID("sign-in-oidc")),
		chromedp.Click(chromedp.ID("sign-in-oidc")), chromedp.WaitVisible(chromedp.ID("as-lead-eli")))
	if err != nil {
		t.Fatalf("the sign-in page does not lead to the identity provider's: %v", err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("as-lead-eli")), chromedp.WaitVisible(chromedp.ID("mine-empty"))); err != nil {
		t.Fatalf("back from the identity provider, the queue does not show: %v", err)
	}
	if who, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("who"))); err != nil || !strings.Contains(who, "lead-eli · lead · US") {
		t.Fatalf("signed in as %q (%v), want lead-eli", who, err)
	}

	// A mark on the document: a reload would drop it.
	if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`document.documentElement.dataset.mark = "loaded once"`)); err != nil {
		t.Fatal(err)
	}
	id := requestRefund(t, st, "rep-ben", "W1", "O-1004", 40000)
	card := "#mine #approval-" + id
	if err := waitFor(ctx, "the new request in the queue", fmt.Sprintf("!!document.querySelector(%q)", card)); err != nil {
		t.Fatal(err)
	}
	if mark, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.documentElement.dataset.mark || ""`)); err != nil || mark != "loaded once" {
		t.Fatalf("the page reloaded to show the new request (mark %q, %v)", mark, err)
	}

	approve := fmt.Sprintf(`%s button[aria-label="Approve refund of $400.00 on O-1004 for rep-ben"]`, card)
	err = chromedp.Do(ctx, chromedp.SendKeys(chromedp.ID("comment-"+id), "receipt checked"),
		chromedp.Click(chromedp.CSS(approve)), chromedp.WaitVisible(chromedp.ID("notice")))
	if err != nil {
		t.Fatalf("approving %s with its named button: %v", id, err)
	}
	if s, by, c := approvalStatus(t, st, id); s != "approved" || by != "lead-eli" || c != "receipt checked" {
		t.Fatalf("approval %s: %s by %q with %q, want approved by lead-eli with her comment", id, s, by, c)
	}

	decided := "#closed #approval-" + id
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("view-decided")), chromedp.WaitVisible(chromedp.CSS(decided))); err != nil {
		t.Fatalf("%s is not under Decided by me: %v", id, err)
	}
	if text, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(decided+" .outcome"))); err != nil || !strings.Contains(text, "Approved by you") {
		t.Errorf("the decided card says %q (%v), want Approved by you", text, err)
	}
	if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`document.documentElement.dataset.mark = "decided view"`)); err != nil {
		t.Fatal(err)
	}
	if s, b := api(t, st, http.MethodPost, "/v1/workflows/W1/resume", "rep-ben", nil); s != http.StatusOK || !strings.Contains(string(b), `"status":"done"`) {
		t.Fatalf("resume W1: %d %s", s, b)
	}
	used := fmt.Sprintf(`(document.querySelector(%q) || {}).textContent.includes("used: the step ran with it")`, decided+" .outcome")
	if err := waitFor(ctx, "the decided card to say it was used", used); err != nil {
		t.Fatal(err)
	}
	if mark, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.documentElement.dataset.mark || ""`)); err != nil || mark != "decided view" {
		t.Errorf("the page reloaded to show what became of the approval (mark %q, %v)", mark, err)
	}
	screenshot(t, ctx, "decided-lead-eli.png", "")
}

// At 390 px wide (a phone) every button of the queue lies within the
// viewport and nothing scrolls sideways; each Approve and Reject button's
// accessible name, as Chromium computes it, names its request, and each
// comment box's is its visible label.
func TestTheQueueFitsAPhoneAndNamesItsButtonsInChromium(t *testing.T) {
	bin := chromium()
	if bin == "" {
		t.Skip("chromium is not installed (/usr/bin/chromium or on PATH); bash .ci/run installs it and runs this test")
	}
	st := stack(t, devstack.Options{})
	ben := requestRefund(t, st, "rep-ben", "W1", "O-1004", 40000)
	reship := reshipAsking(t, st, "rep-ben", "W2", "O-1003")
	over := requestRefund(t, st, "rep-ben", "W3", "O-1004", 30000) // above lead-fay's $100: reject only
	ctx := within(t, newChromium(t, bin))
	err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateTouch),
		chromedp.Navigate(st.Endpoints.Sidecar+"/login"), chromedp.Click(chromedp.ID("dev-lead-fay")),
		chromedp.WaitVisible(chromedp.CSS("#approval-"+over)))
	if err != nil {
		t.Fatalf("signing in as lead-fay on a phone: %v", err)
	}
	screenshot(t, ctx, "queue-390px.png", "")

	fits, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`(() => {
		const w = document.documentElement.clientWidth, out = [];
		if (document.documentElement.scrollWidth > w) out.push("the page scrolls sideways: " + document.documentElement.scrollWidth + " > " + w);
		for (const b of document.querySelectorAll("button, a.button")) {
			const r = b.getBoundingClientRect();
			if (r.width === 0 || r.left < 0 || r.right > w) out.push((b.getAttribute("aria-label") || b.textContent.trim()) + ": " + r.left + "–" + r.right + " of " + w);
		}
		return out;
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fits {
		t.Errorf("at 390 px: %s", f)
	}
	if n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("button.approve, button.reject").length`)); err != nil || n < 3 {
		t.Fatalf("%d decision buttons on the page (%v), want lead-fay's reject of %s at least and the others' buttons", n, err, over)
	}

	for sel, want := range map[string]string{
		"#approval-" + over + " button.reject":   "Reject refund of $300.00 on O-1004 for rep-ben",
		"#approval-" + ben + " button.reject":    "Reject refund of $400.00 on O-1004 for rep-ben",
		"#approval-" + reship + " button.reject": "Reject reship of O-1003 for rep-ben",
		"#comment-" + over:                       "Comment (kept in the audit trail)",
	} {
		if got := accessibleName(t, ctx, sel); got != want {
			t.Errorf("the accessible name of %s is %q, want %q", sel, got, want)
		}
	}
	label, err := chromedp.Run(ctx, chromedp.Evaluate[bool](fmt.Sprintf(
		`(() => { const r = document.querySelector('label[for="comment-%s"]').getBoundingClientRect(); return r.width > 0 && r.height > 0; })()`, over)))
	if err != nil || !label {
		t.Errorf("the comment box's label is not visible (%v)", err)
	}
}

// accessibleName is the name Chromium's accessibility tree gives the node
// sel selects.
func accessibleName(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	nodes, err := chromedp.Run(ctx, chromedp.Nodes(chromedp.CSS(sel)))
	if err != nil || len(nodes) != 1 {
		t.Fatalf("%s: %d nodes, %v", sel, len(nodes), err)
	}
	no := false
	tree, err := chromedp.Call(ctx, accessibility.GetPartialAXTree,
		accessibility.GetPartialAXTreeParams{BackendNodeID: nodes[0].BackendNodeID, FetchRelatives: &no})
	if err != nil || len(tree.Nodes) == 0 || tree.Nodes[0].Name == nil {
		t.Fatalf("%s: no accessibility node (%v)", sel, err)
	}
	var name string
	if err := json.Unmarshal(tree.Nodes[0].Name.Value, &name); err != nil {
		t.Fatalf("%s: name %s: %v", sel, tree.Nodes[0].Name.Value, err)
	}
	return name
}

// reshipAsking has rep who reship order in workflow wf+"a", then again in
// wf+"b", which needs a lead (R10, a second reship of an order), and
// returns the approval the second waits on.
func reshipAsking(t *testing.T, st *devstack.Stack, who, wf, order string) string {
	t.Helper()
	var step struct {
		Status   string `json:"status"`
		Approval struct {
			ID string `json:"id"`
		} `json:"approval"`
	}
	for _, w := range []string{wf + "a", wf + "b"} {
		if s, b := api(t, st, http.MethodPost, "/v1/workflows", who, map[string]string{"id": w, "ticket": "T-" + w}); s != http.StatusCreated {
			t.Fatalf("create %s: %d %s", w, s, b)
		}
		s, b := api(t, st, http.MethodPost, "/v1/workflows/"+w+"/steps", who, map[string]any{"tool": "reship_order", "args": map[string]any{"order": order}})
		if err := json.Unmarshal(b, &step); err != nil {
			t.Fatalf("reship %s in %s: %d %s", order, w, s, b)
		}
	}
	if step.Status != "waiting_approval" {
		t.Fatalf("a second reship of %s: %s, want waiting for a lead", order, step.Status)
	}
	return step.Approval.ID
}
