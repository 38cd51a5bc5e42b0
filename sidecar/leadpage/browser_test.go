package leadpage_test

import (
	"context"
	"flag"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/countersign/countersign/cmd/devstack"
)

var screenshotTo = flag.String("screenshot", "", "also write the queue's screenshot (PNG) to this file, e.g. approvals.png (the README shows sidecar/leadpage/approvals.png)")

// chromium is Debian's chromium, or "" when it is not installed.
func chromium() string {
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	p, _ := exec.LookPath("chromium")
	return p
}

// newChromium starts a headless Chromium with a fresh profile for the test
// and returns its first tab.
func newChromium(t *testing.T, bin string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1100, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	// The first run starts the browser, which lives as long as its
	// context: no deadline on this one.
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	return ctx
}

// within bounds each step of the browser, so that a page that never shows
// what the test waits for fails the test instead of hanging it.
func within(t *testing.T, ctx context.Context) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// A lead signs in, sees rep-ben's $400 refund with its details, approves it
// with a comment and sees it leave the queue; another lead, whose limit is
// $100, sees a fresh $400 request apart, marked above her limit; a form
// posted without its CSRF token is refused (403) and changes nothing.
func TestALeadApprovesInChromium(t *testing.T) {
	bin := chromium()
	if bin == "" {
		t.Skip("chromium is not installed (/usr/bin/chromium or on PATH); bash .ci/run installs it and runs this test")
	}
	st := stack(t, devstack.Options{})
	id := requestRefund(t, st, "rep-ben", "W1", "O-1004", 40000)
	other := requestRefund(t, st, "rep-ana", "W2", "O-1002", 30000)
	// A re-request after an amendment, for the earlier call beside the new.
	requestRefund(t, st, "rep-ben", "W4", "O-1003", 6000)
	amended := amendRefund(t, st, "rep-ben", "W4", 1, "O-1003", 7000)
	base := st.Endpoints.Sidecar
	browser := newChromium(t, bin)

	// lead-eli, through the dev sign-in.
	ctx := within(t, browser)
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/approvals"), chromedp.WaitVisible(chromedp.ID("dev-lead-eli"))); err != nil {
		t.Fatalf("the queue does not send a signed-out browser to the sign-in form: %v", err)
	}
	card := chromedp.CSS("#mine #approval-" + id)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("dev-lead-eli")), chromedp.WaitVisible(card)); err != nil {
		t.Fatalf("signed in as lead-eli, rep-ben's request %s is not in her queue: %v", id, err)
	}
	text, err := chromedp.Run(ctx, chromedp.Text(card))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Refund $400.00 on order O-1004", "rep-ben (US)", "R7-refund-needs-approval", "T-W1",
		"customer-4", "$420.00", "issue_refund $400.00 on order O-1004"} {
		if !strings.Contains(text, want) {
			t.Errorf("lead-eli's card for %s does not show %q:\n%s", id, want, text)
		}
	}
	apart, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#apart #approval-"+other)))
	if err != nil || !strings.Contains(apart, "Another region") {
		t.Errorf("rep-ana's EU request is not shown apart as another region's: %q %v", apart, err)
	}
	before, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#mine #approval-"+amended+" .call.before")))
	if err != nil || !strings.Contains(before, "issue_refund $60.00 on order O-1003") {
		t.Errorf("the amended request %s does not show the earlier call: %q %v", amended, before, err)
	}
	screenshot(t, ctx, "queue-lead-eli.png", *screenshotTo)

	err = chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.CSS("#approval-"+id+" input[name=comment]"), "customer called twice; receipt checked"),
		chromedp.Click(chromedp.CSS("#approval-"+id+" button.approve")),
		chromedp.WaitVisible(chromedp.ID("notice")))
	if err != nil {
		t.Fatalf("approving %s: %v", id, err)
	}
	main, err := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("main")))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(main, `id="approval-`+id+`"`) || !strings.Contains(main, "Approved "+id) {
		t.Errorf("after approving, %s is still in the queue or the notice does not say so:\n%s", id, main)
	}
	if s, by, c := approvalStatus(t, st, id); s != "approved" || by != "lead-eli" || c != "customer called twice; receipt checked" {
		t.Errorf("approval %s: %s by %q with %q, want approved by lead-eli with her comment", id, s, by, c)
	}

	// lead-fay, in a browser context of her own, on a fresh request.
	fresh := requestRefund(t, st, "rep-ben", "W3", "O-1004", 40000)
	fayTab, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	fay := within(t, fayTab)
	card = chromedp.CSS("#apart #approval-" + fresh)
	err = chromedp.Do(fay, chromedp.Navigate(base+"/login"), chromedp.Click(chromedp.ID("dev-lead-fay")), chromedp.WaitVisible(card))
	if err != nil {
		t.Fatalf("signed in as lead-fay, the fresh request %s is not shown apart: %v", fresh, err)
	}
	code, err := chromedp.Run(fay, chromedp.AttributeValue(chromedp.CSS("#approval-"+fresh+" .reason"), "data-code"))
	if err != nil || code.Value != "above_approver_limit" {
		t.Errorf("lead-fay's card for %s: reason code %q (%v), want above_approver_limit", fresh, code.Value, err)
	}
	screenshot(t, fay, "queue-lead-fay.png", "")

	// Her reject form, posted without its CSRF token.
	res, err := chromedp.RunResponse(fay,
		chromedp.RemoveAttribute(chromedp.CSS("#approval-"+fresh+" input[name=csrf]"), "name"),
		chromedp.Click(chromedp.CSS("#approval-"+fresh+" button.reject")))
	if err != nil {
		t.Fatalf("posting the form without its CSRF token: %v", err)
	}
	body, _ := chromedp.Run(fay, chromedp.Text(chromedp.ID("refused")))
	if res.Status != http.StatusForbidden || !strings.Contains(body, "csrf_token_invalid") {
		t.Errorf("a form without its CSRF token answered %d %q, want 403 csrf_token_invalid", res.Status, body)
	}
	if s, _, _ := approvalStatus(t, st, fresh); s != "pending" {
		t.Errorf("after the refused post %s is %s, want pending", fresh, s)
	}
}

// screenshot saves the page as PNG under the test's temp dir, and to also
// when it is set.
func screenshot(t *testing.T, ctx context.Context, name, also string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	for _, path := range []string{filepath.Join(t.TempDir(), name), also} {
		if path == "" {
			continue
		}
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s (%d bytes)", path, len(png))
	}
}
