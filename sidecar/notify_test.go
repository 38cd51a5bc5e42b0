package sidecar_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign/cmd/devstack"
	"github.com/countersign/countersign/executor/notify"
	"github.com/countersign/countersign/executor/strictjson"
)

var webhookSecret = []byte("4f1c0a8e-notify-test-secret")

// webhook is a receiver of approval notices on a real socket. Every post
// is checked as a receiver would check it (the signature with the shared
// secret, the body decoded strictly) and handed to the test on got; hold,
// when set, runs before the answer.
type webhook struct {
	*httptest.Server
	got chan notify.Notice
}

func newWebhook(t *testing.T, hold func(r *http.Request)) *webhook {
	t.Helper()
	wh := &webhook{got: make(chan notify.Notice, 16)}
	wh.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("webhook: reading the body: %v", err)
		}
		if err := notify.Verify(webhookSecret, r.Header.Get(notify.Header), body, time.Now(), 0); err != nil {
			t.Errorf("webhook: %s %q: %v", notify.Header, r.Header.Get(notify.Header), err)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var n notify.Notice
		if err := strictjson.Decode(body, &n); err != nil {
			t.Errorf("webhook: body %s: %v", body, err)
		}
		wh.got <- n
		if hold != nil {
			hold(r)
		}
	}))
	t.Cleanup(wh.Close)
	return wh
}

// next is the next notice, which must be event for approval id.
func (wh *webhook) next(t *testing.T, event notify.Event, id string) notify.Notice {
	t.Helper()
	select {
	case n := <-wh.got:
		if n.Event != event || n.Approval.ID != id {
			t.Fatalf("notice %s of %s, want %s of %s: %s", n.Event, n.Approval.ID, event, id, n.Text)
		}
		return n
	case <-time.After(30 * time.Second):
		t.Fatalf("no %s notice of %s reached the webhook", event, id)
		return notify.Notice{}
	}
}

// A sidecar started with a webhook posts, signed with the shared secret,
// the approval a rep's refund asks for, the lead's approval, its use when
// the refund runs, and the void of an approval whose call was amended
// away; each names the amount in dollars, the order, the rep and the rule
// and links to the lead's page under the public URL.
func TestApprovalNoticesReachASignedWebhook(t *testing.T) {
	wh := newWebhook(t, nil)
	const public = "https://approvals.quillfeather.example"
	e := start(t, devstack.Options{NotifyWebhook: wh.URL, NotifyWebhookSecret: webhookSecret, PublicURL: public})
	e.open(t, "rep-ana", "W-notice")
	r, s := e.propose(t, "rep-ana", "W-notice", "issue_refund", refund("O-1002", 12000))
	r.want(t, http.StatusAccepted, "")
	id := s.Approval.ID

	n := wh.next(t, notify.Requested, id)
	link := public + "/approvals#approval-" + id
	if n.URL != link {
		t.Errorf("url %q, want %q", n.URL, link)
	}
	for _, w := range []string{id, "$120.00", "O-1002", "rep-ana", "rule " + s.Rule, link} {
		if !strings.Contains(n.Text, w) {
			t.Errorf("text %q does not say %q", n.Text, w)
		}
	}
	if a := n.Approval; a.Workflow != "W-notice" || a.N != 1 || a.Requester != "rep-ana" || a.Order != "O-1002" ||
		a.Amount == nil || *a.Amount != 12000 || a.Rule != s.Rule || a.Status != "pending" || a.Expires.IsZero() {
		t.Errorf("approval %+v", a)
	}

	e.call(t, http.MethodPost, "/v1/approvals/"+id+"/approve", "lead-dee", map[string]string{"comment": "photos attached"}).
		want(t, http.StatusOK, "")
	if n := wh.next(t, notify.Approved, id); n.Approval.Approver != "lead-dee" || !strings.Contains(n.Text, "approved by lead-dee") {
		t.Errorf("approved notice %+v", n)
	}
	e.resume(t, "rep-ana", "W-notice")
	wh.next(t, notify.Used, id)

	_, s2 := e.propose(t, "rep-ana", "W-notice", "issue_refund", refund("O-1001", 9000))
	if s2.Approval == nil {
		t.Fatalf("step 2 %+v, want it waiting for an approval", s2)
	}
	wh.next(t, notify.Requested, s2.Approval.ID)
	e.call(t, http.MethodPatch, "/v1/workflows/W-notice/steps/2", "rep-ana", map[string]any{"args": refund("O-1002", 12000)}).
		want(t, http.StatusOK, "")
	wh.next(t, notify.Void, s2.Approval.ID)

	// Each notice is counted once its post has answered: all but the
	// last have, and none was dropped or failed.
	m := string(e.call(t, http.MethodGet, "/metrics", "", nil).body)
	if sent := metric(t, m, `countersign_notices_total{outcome="sent"}`); sent < 4 {
		t.Errorf("sent %v, want at least 4", sent)
	}
	for _, outcome := range []string{"failed", "dropped"} {
		if v := metric(t, m, `countersign_notices_total{outcome="`+outcome+`"}`); v != 0 {
			t.Errorf("%s %v, want 0", outcome, v)
		}
	}
}

// metric is the value of the sample named exactly so in a /metrics page.
func metric(t *testing.T, page, sample string) float64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(sample) + ` (\S+)$`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("/metrics has no %s", sample)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// A webhook that does not answer holds up no decision: while the receiver
// still holds the notice of the request, a lead's approve answers, and
// the notice of the approval follows once the receiver lets go.
func TestAHangingWebhookDoesNotDelayTheApproval(t *testing.T) {
	var first atomic.Bool
	held, release := make(chan struct{}), make(chan struct{})
	wh := newWebhook(t, func(r *http.Request) {
		if !first.CompareAndSwap(false, true) {
			return // only the first post is held
		}
		close(held)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	e := start(t, devstack.Options{NotifyWebhook: wh.URL, NotifyWebhookSecret: webhookSecret})
	e.open(t, "rep-ana", "W-hang")
	_, s := e.propose(t, "rep-ana", "W-hang", "issue_refund", refund("O-1002", 12000))
	if s.Approval == nil {
		t.Fatalf("step %+v, want it waiting for an approval", s)
	}
	if n := wh.next(t, notify.Requested, s.Approval.ID); n.URL != e.st.Endpoints.Sidecar+"/approvals#approval-"+s.Approval.ID {
		t.Errorf("url %q, want the lead's page on the sidecar's own address (no public URL given)", n.URL)
	}
	<-held // the receiver holds the post and will not answer until release

	approved := make(chan reply, 1)
	go func() {
		approved <- e.call(t, http.MethodPost, "/v1/approvals/"+s.Approval.ID+"/approve", "lead-dee", nil)
	}()
	select {
	case r := <-approved:
		r.want(t, http.StatusOK, "")
	case <-time.After(30 * time.Second): // a guard, not a measure: the receiver holds on until release
		t.Fatal("the approve waited for the webhook")
	}
	select {
	case n := <-wh.got:
		t.Fatalf("a second notice (%s) reached the webhook while it held the first", n.Event)
	default:
	}
	close(release)
	wh.next(t, notify.Approved, s.Approval.ID)
}
