package notify_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/notify"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/strictjson"
	"github.com/countersign/countersign/executor/tool"
)

var _ engine.Notifier = (*notify.Notifier)(nil)

var secret = []byte("whsec-test")

// received is one post as the receiver saw it: the signature checked with
// notify.Verify against the shared secret, the body decoded strictly.
type received struct {
	attempt   int
	signature string
	verified  error
	body      []byte
	notice    notify.Notice
	decoded   error
}

// receiver is a webhook on a real socket. answer decides what the
// attempt-th post gets (counted from 1 over the receiver's life); every
// post is also sent on got.
type receiver struct {
	*httptest.Server
	got chan received
}

func newReceiver(t *testing.T, answer func(attempt int, w http.ResponseWriter, r *http.Request)) *receiver {
	t.Helper()
	rc := &receiver{got: make(chan received, 64)}
	var attempts atomic.Int32
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		attempt := int(attempts.Add(1))
		body, _ := io.ReadAll(r.Body)
		got := received{attempt: attempt, signature: r.Header.Get(notify.Header), body: body}
		got.verified = notify.Verify(secret, got.signature, body, time.Now(), 0)
		got.decoded = strictjson.Decode(body, &got.notice)
		rc.got <- got
		answer(attempt, w, r)
	}))
	t.Cleanup(rc.Close)
	return rc
}

func ok(int, http.ResponseWriter, *http.Request) {}

// next is the next post the receiver got.
func (rc *receiver) next(t *testing.T) received {
	t.Helper()
	select {
	case g := <-rc.got:
		return g
	case <-time.After(30 * time.Second):
		t.Fatal("no post reached the receiver")
		return received{}
	}
}

// start runs a notifier posting to url, with quick retries, closed when
// the test ends.
func start(t *testing.T, url string, edit func(*notify.Options)) (*notify.Notifier, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	o := notify.Options{URL: url, Secret: secret, PublicURL: "https://cs.example/", FirstBackoff: time.Millisecond, Registerer: reg}
	if edit != nil {
		edit(&o)
	}
	n, err := notify.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close(context.Background()) })
	return n, reg
}

// closeAndCount closes n, which sends what is queued first, and returns
// countersign_notices_total by outcome.
func closeAndCount(t *testing.T, n *notify.Notifier, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	if err := n.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	return count(t, reg)
}

func count(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "countersign_notices_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			out[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
		}
	}
	return out
}

func want(t *testing.T, got map[string]float64, sent, failed, dropped float64) {
	t.Helper()
	if got["sent"] != sent || got["failed"] != failed || got["dropped"] != dropped {
		t.Errorf("countersign_notices_total %v, want sent %v failed %v dropped %v", got, sent, failed, dropped)
	}
}

// pending is a refund of $70.00 on O-1002 waiting for a lead.
func pending() store.Approval {
	return store.Approval{ID: "AP-7", Workflow: "wf-1", N: 2, Tool: tool.IssueRefund,
		Args:      tool.Args{Order: "O-1002", Amount: 7000},
		Summary:   "Refund $70.00 on order O-1002 for customer-2; requested by rep-ana; workflow wf-1",
		Requester: "rep-ana", Rule: "R4", Status: store.ApprovalPending, OrderPaid: 48000,
		Created: time.Date(2030, 1, 2, 15, 0, 0, 0, time.UTC), Expires: time.Date(2030, 1, 2, 15, 15, 0, 0, time.UTC)}
}

// A requested approval reaches the receiver signed with the shared secret,
// as {text, event, approval, url}: the text names the amount in dollars,
// the order, the rep, the rule and the link to the lead's page.
func TestRequestedNoticeIsSignedAndSaysWhatALeadNeeds(t *testing.T) {
	rc := newReceiver(t, ok)
	n, reg := start(t, rc.URL, nil)
	n.ApprovalChanged(pending())
	g := rc.next(t)
	if g.verified != nil {
		t.Fatalf("signature %q: %v", g.signature, g.verified)
	}
	if g.decoded != nil {
		t.Fatalf("body %s: %v", g.body, g.decoded)
	}
	members, err := strictjson.Object(g.body)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range members {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if strings.Join(keys, ",") != "approval,event,text,url" {
		t.Errorf("body members %v, want approval, event, text, url", keys)
	}
	nt := g.notice
	link := "https://cs.example/approvals#approval-AP-7"
	if nt.Event != notify.Requested || nt.URL != link {
		t.Errorf("event %q url %q, want %q %q", nt.Event, nt.URL, notify.Requested, link)
	}
	for _, w := range []string{"AP-7", "$70.00", "O-1002", "rep-ana", "rule R4", link} {
		if !strings.Contains(nt.Text, w) {
			t.Errorf("text %q does not say %q", nt.Text, w)
		}
	}
	a := nt.Approval
	if a.ID != "AP-7" || a.Workflow != "wf-1" || a.N != 2 || a.Tool != tool.IssueRefund || a.Requester != "rep-ana" ||
		a.Status != store.ApprovalPending || a.Rule != "R4" || a.Order != "O-1002" || a.Amount == nil || *a.Amount != 7000 ||
		a.Args.Order != "O-1002" || a.Args.Amount == nil || *a.Args.Amount != 7000 || a.Summary == "" || !a.Expires.Equal(pending().Expires) {
		t.Errorf("approval %+v", a)
	}
	want(t, closeAndCount(t, n, reg), 1, 0, 0)
}

// Sign is the HMAC-SHA256 of "t.body", lowercase hex, in the documented
// header form (the vector computed with Python's hmac), and Verify refuses
// another secret, a changed body, an old time and a malformed header.
func TestSignAndVerify(t *testing.T) {
	at := time.Unix(1700000000, 0)
	body := []byte(`{"event":"approval_requested"}`)
	sig := notify.Sign(secret, at, body)
	if want := "t=1700000000,v1=833d05574f9b33dae157efd4ba6470cef3bfc0a2294bd6279b3b94a6c2f15cc6"; sig != want {
		t.Fatalf("Sign = %q, want %q", sig, want)
	}
	for _, tc := range []struct {
		name   string
		secret []byte
		header string
		body   []byte
		now    time.Time
		want   error
	}{
		{"the genuine notice", secret, sig, body, at.Add(time.Minute), nil},
		{"a second v1 beside a stale one (a rotated secret)", secret, "t=1700000000,v1=00ff," + sig[len("t=1700000000,"):], body, at, nil},
		{"another secret", []byte("other"), sig, body, at, notify.ErrSignatureMismatch},
		{"a changed body", secret, sig, []byte(`{"event":"approval_approved"}`), at, notify.ErrSignatureMismatch},
		{"a replay an hour later", secret, sig, body, at.Add(time.Hour), notify.ErrSignatureStale},
		{"no v1", secret, "t=1700000000", body, at, notify.ErrSignatureMalformed},
		{"no t", secret, "v1=833d", body, at, notify.ErrSignatureMalformed},
		{"an empty header", secret, "", body, at, notify.ErrSignatureMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := notify.Verify(tc.secret, tc.header, tc.body, tc.now, 0); !errors.Is(err, tc.want) {
				t.Errorf("Verify: %v, want %v", err, tc.want)
			}
		})
	}
}

// Each status an approval enters is its own event, with a line that says
// what became of it and who decided.
func TestEveryTransitionHasItsEvent(t *testing.T) {
	rc := newReceiver(t, ok)
	n, reg := start(t, rc.URL, nil)
	decided := func(s store.ApprovalStatus, edit func(*store.Approval)) store.Approval {
		a := pending()
		a.Status, a.Approver = s, "lead-dee"
		if edit != nil {
			edit(&a)
		}
		return a
	}
	reship := pending()
	reship.Tool, reship.Args, reship.Rule = tool.ReshipOrder, tool.Args{Order: "O-1004"}, "R7"
	for _, tc := range []struct {
		a     store.Approval
		event notify.Event
		says  []string
	}{
		{pending(), notify.Requested, []string{"Approval requested", "expires Jan 2 15:15 UTC"}},
		{decided(store.ApprovalApproved, nil), notify.Approved, []string{"approved by lead-dee"}},
		{decided(store.ApprovalRejected, func(a *store.Approval) { a.Comment = "call the customer" }), notify.Rejected, []string{"rejected by lead-dee"}},
		{decided(store.ApprovalExpired, func(a *store.Approval) { a.Approver = "" }), notify.Expired, []string{"expired unanswered"}},
		{decided(store.ApprovalVoid, func(a *store.Approval) { a.Approver = "" }), notify.Void, []string{"is void"}},
		{decided(store.ApprovalUsed, nil), notify.Used, []string{"used, the approved call went ahead"}},
		{decided(store.ApprovalUsed, func(a *store.Approval) { a.Retroactive = true }), notify.Used, []string{"ratified after execution by lead-dee"}},
		{reship, notify.Requested, []string{"reship order O-1004 (paid $480.00)", "rule R7"}},
	} {
		n.ApprovalChanged(tc.a)
		g := rc.next(t)
		if g.notice.Event != tc.event || g.notice.Approval.Status != tc.a.Status {
			t.Errorf("%s: event %q status %q, want %q", tc.a.Status, g.notice.Event, g.notice.Approval.Status, tc.event)
		}
		for _, w := range tc.says {
			if !strings.Contains(g.notice.Text, w) {
				t.Errorf("%s: text %q does not say %q", tc.a.Status, g.notice.Text, w)
			}
		}
	}
	want(t, closeAndCount(t, n, reg), 8, 0, 0)
}

// A value from a record cannot make Slack link or mention anything: &, <
// and > in it are escaped in the text (the JSON keeps it as it is).
func TestTextEscapesWhatSlackWouldInterpret(t *testing.T) {
	rc := newReceiver(t, ok)
	n, _ := start(t, rc.URL, nil)
	a := pending()
	a.Args.Order = "<!channel>&"
	n.ApprovalChanged(a)
	g := rc.next(t)
	if !strings.Contains(g.notice.Text, "order &lt;!channel&gt;&amp;") || strings.Contains(g.notice.Text, "<!channel>") {
		t.Errorf("text %q", g.notice.Text)
	}
	if g.notice.Approval.Order != "<!channel>&" {
		t.Errorf("approval.order %q", g.notice.Approval.Order)
	}
}

// A receiver that answers 500 gets the same notice again, and it counts
// as sent once it answers 200; so does one whose connection drops, and
// one that answers 429.
func TestRetriedOnServerErrorsAndNetworkErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		first func(w http.ResponseWriter, r *http.Request)
	}{
		{"500", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusInternalServerError) }},
		{"429", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTooManyRequests) }},
		{"a dropped connection", func(w http.ResponseWriter, _ *http.Request) {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := newReceiver(t, func(attempt int, w http.ResponseWriter, r *http.Request) {
				if attempt == 1 {
					tc.first(w, r)
				}
			})
			n, reg := start(t, rc.URL, nil)
			n.ApprovalChanged(pending())
			first, second := rc.next(t), rc.next(t)
			if string(first.body) != string(second.body) {
				t.Errorf("the retry sent another body:\n%s\n%s", first.body, second.body)
			}
			if second.verified != nil {
				t.Errorf("the retry's signature: %v", second.verified)
			}
			want(t, closeAndCount(t, n, reg), 1, 0, 0)
		})
	}
}

// A receiver that keeps failing is given up on after Attempts posts; a
// 4xx other than 429, or a redirect, is not tried again.
func TestGivenUpAfterAttemptsAndNotRetriedOnRefusal(t *testing.T) {
	for _, tc := range []struct {
		status, posts int
	}{
		{http.StatusServiceUnavailable, 3},
		{http.StatusBadRequest, 1},
		{http.StatusUnauthorized, 1},
		{http.StatusFound, 1},
	} {
		t.Run(http.StatusText(tc.status), func(t *testing.T) {
			rc := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
				if tc.status == http.StatusFound {
					w.Header().Set("Location", "/elsewhere")
				}
				w.WriteHeader(tc.status)
			})
			n, reg := start(t, rc.URL, func(o *notify.Options) { o.Attempts = 3 })
			n.ApprovalChanged(pending())
			want(t, closeAndCount(t, n, reg), 0, 1, 0)
			if posts := len(rc.got); posts != tc.posts {
				t.Errorf("%d posts, want %d", posts, tc.posts)
			}
		})
	}
}

// ApprovalChanged never waits: with the one sender stuck on a receiver
// that does not answer and the queue full, a further notice is dropped,
// counted, and the call returns. Closing with no time left drops what the
// sender holds and what is still queued, and counts them too; so is a
// notice after Close.
func TestFullQueueDropsInsteadOfWaiting(t *testing.T) {
	release := make(chan struct{})
	rc := newReceiver(t, func(_ int, _ http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	n, reg := start(t, rc.URL, func(o *notify.Options) { o.QueueSize, o.Attempts = 1, 1 })
	first, second, third := pending(), pending(), pending()
	second.ID, third.ID = "AP-8", "AP-9"
	n.ApprovalChanged(first)
	rc.next(t)                // the sender holds AP-7 at the receiver, which does not answer
	n.ApprovalChanged(second) // fills the queue
	n.ApprovalChanged(third)  // has nowhere to go
	want(t, count(t, reg), 0, 0, 1)

	ctx, cancel := context.WithCancel(context.Background())
	cancel() // no time left: AP-7 is cut short and AP-8 never sent
	if err := n.Close(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Close: %v", err)
	}
	got := count(t, reg)
	want(t, got, 0, 0, 3)
	n.ApprovalChanged(pending())
	if after := count(t, reg); after["dropped"] != got["dropped"]+1 {
		t.Errorf("a notice after Close: %v, want it dropped", after)
	}
}

// The secret file's content is the secret, without the white space around
// it; a missing file is the file system's error and an empty one
// ErrNoSecret, so serve can say what to do.
func TestReadSecretFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if s, err := notify.ReadSecretFile(write("secret", "  s3cret\n")); err != nil || string(s) != "s3cret" {
		t.Errorf("ReadSecretFile: %q, %v", s, err)
	}
	if _, err := notify.ReadSecretFile(write("blank", " \n\t\n")); !errors.Is(err, notify.ErrNoSecret) {
		t.Errorf("blank file: %v, want ErrNoSecret", err)
	}
	if _, err := notify.ReadSecretFile(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v, want os.ErrNotExist", err)
	}
}

// Validate names every problem at once and never repeats the webhook URL,
// which may carry a chat service's credential.
func TestValidateReportsEveryProblemWithoutTheURL(t *testing.T) {
	err := notify.Options{URL: "ftp://hooks.example/T0/B0/XXXX", PublicURL: "cs.example"}.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, w := range []string{"webhook URL must be an absolute http(s) URL", "no webhook secret", "public URL"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%v does not say %q", err, w)
		}
	}
	if strings.Contains(err.Error(), "XXXX") {
		t.Errorf("%v repeats the webhook URL", err)
	}
	if !errors.Is(err, notify.ErrNoSecret) {
		t.Errorf("%v is not ErrNoSecret", err)
	}
}
