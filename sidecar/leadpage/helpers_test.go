package leadpage_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/cmd/devstack"
)

// stack starts a dev stack over a fresh data directory and closes it when
// the test ends.
func stack(t *testing.T, o devstack.Options) *devstack.Stack {
	t.Helper()
	o.DataDir = t.TempDir()
	st, err := devstack.Start(context.Background(), o)
	if err != nil {
		t.Fatalf("devstack.Start: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// browser is a cookie-keeping client of the page that does not follow
// redirects, so each test sees where the page sends it.
type browser struct {
	base    string
	client  *http.Client
	cookies map[string]*http.Cookie
}

func newBrowser(base string, client *http.Client) *browser {
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Second}
	}
	c := *client
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &browser{base: base, client: &c, cookies: map[string]*http.Cookie{}}
}

// page is one answer of the page, read in full.
type page struct {
	status int
	header http.Header
	body   string
	set    map[string]*http.Cookie // cookies this answer set
}

// location is where a redirect sends the browser.
func (p page) location() string { return p.header.Get("Location") }

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf is the CSRF token of the page's forms.
func (p page) csrf(t *testing.T) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("no CSRF token in the page: %s", p.body)
	}
	return m[1]
}

// do sends a request with the browser's cookies and keeps those it is
// given (a cookie with MaxAge < 0 is forgotten).
func (b *browser) do(t *testing.T, method, path string, form url.Values) page {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.base+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	req.Header.Set("Accept", "text/html")
	for _, c := range b.cookies {
		req.AddCookie(&http.Cookie{Name: c.Name, Value: c.Value})
	}
	res, err := b.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, path, err)
	}
	p := page{status: res.StatusCode, header: res.Header, body: string(out), set: map[string]*http.Cookie{}}
	for _, c := range res.Cookies() {
		p.set[c.Name] = c
		if c.MaxAge < 0 {
			delete(b.cookies, c.Name)
		} else {
			b.cookies[c.Name] = c
		}
	}
	return p
}

func (b *browser) get(t *testing.T, path string) page { return b.do(t, http.MethodGet, path, nil) }

func (b *browser) post(t *testing.T, path string, form url.Values) page {
	return b.do(t, http.MethodPost, path, form)
}

// signIn signs in with token through the form and expects to land on the
// queue.
func (b *browser) signIn(t *testing.T, token string) {
	t.Helper()
	csrf := b.get(t, "/login").csrf(t)
	p := b.post(t, "/login", url.Values{"csrf": {csrf}, "token": {token}})
	p.want(t, http.StatusSeeOther, "")
	if p.location() != "/approvals" {
		t.Fatalf("signed in, sent to %q, want /approvals", p.location())
	}
}

// want fails the test unless the answer has status and, when code is
// set, shows that error code.
func (p page) want(t *testing.T, status int, code string) {
	t.Helper()
	if p.status != status {
		t.Fatalf("status %d, want %d; body %s", p.status, status, p.body)
	}
	if code != "" && !strings.Contains(p.body, "<code>"+code+"</code>") {
		t.Fatalf("the page does not show code %s: %s", code, p.body)
	}
}

// api calls the JSON API with person who's token.
func api(t *testing.T, st *devstack.Stack, method, path, who string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, st.Endpoints.Sidecar+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if who != "" {
		req.Header.Set("Authorization", "Bearer "+st.Tokens[who])
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	return res.StatusCode, out
}

// requestRefund has rep who propose a refund in a new workflow wf and
// returns the approval it waits on.
func requestRefund(t *testing.T, st *devstack.Stack, who, wf, order string, cents int64) string {
	t.Helper()
	return requestRefundBecause(t, st, who, wf, order, cents, "")
}

// requestRefundBecause is requestRefund with the agent's stated reason
// ("" for none).
func requestRefundBecause(t *testing.T, st *devstack.Stack, who, wf, order string, cents int64, reason string) string {
	t.Helper()
	call := map[string]any{"tool": "issue_refund", "args": map[string]any{"order": order, "amount": cents}}
	if reason != "" {
		call["reason"] = reason
	}
	if s, b := api(t, st, http.MethodPost, "/v1/workflows", who, map[string]string{"id": wf, "ticket": "T-" + wf}); s != http.StatusCreated {
		t.Fatalf("create workflow %s: %d %s", wf, s, b)
	}
	s, b := api(t, st, http.MethodPost, "/v1/workflows/"+wf+"/steps", who, call)
	var step struct {
		Status   string `json:"status"`
		Approval struct {
			ID string `json:"id"`
		} `json:"approval"`
	}
	if err := json.Unmarshal(b, &step); err != nil || s != http.StatusAccepted || step.Status != "waiting_approval" {
		t.Fatalf("propose a refund of %d on %s: %d %s, want 202 waiting_approval", cents, order, s, b)
	}
	return step.Approval.ID
}

// amendRefund has rep who amend step n of workflow wf to another amount
// and resume it, which requests a new approval in place of the old; it
// returns the new approval.
func amendRefund(t *testing.T, st *devstack.Stack, who, wf string, n int, order string, cents int64) string {
	t.Helper()
	path := "/v1/workflows/" + wf + "/steps/" + strconv.Itoa(n)
	if s, b := api(t, st, http.MethodPatch, path, who, map[string]any{"args": map[string]any{"order": order, "amount": cents}}); s != http.StatusOK {
		t.Fatalf("amend %s: %d %s", path, s, b)
	}
	s, b := api(t, st, http.MethodPost, "/v1/workflows/"+wf+"/resume", who, nil)
	if s != http.StatusOK {
		t.Fatalf("resume %s: %d %s", wf, s, b)
	}
	var w struct {
		Steps []struct {
			Status   string `json:"status"`
			Approval struct {
				ID string `json:"id"`
			} `json:"approval"`
		} `json:"steps"`
	}
	if err := json.Unmarshal(b, &w); err != nil || len(w.Steps) < n || w.Steps[n-1].Status != "waiting_approval" {
		t.Fatalf("after amending, step %d of %s does not wait for an approval: %s", n, wf, b)
	}
	return w.Steps[n-1].Approval.ID
}

// approvalStatus reads an approval through the API, as an operator.
func approvalStatus(t *testing.T, st *devstack.Stack, id string) (status, approver, comment string) {
	t.Helper()
	s, b := api(t, st, http.MethodGet, "/v1/approvals/"+id, "ops-ida", nil)
	var a struct {
		Status   string `json:"status"`
		Approver string `json:"approver"`
		Comment  string `json:"comment"`
	}
	if err := json.Unmarshal(b, &a); err != nil || s != http.StatusOK {
		t.Fatalf("GET approval %s: %d %s", id, s, b)
	}
	return a.Status, a.Approver, a.Comment
}
