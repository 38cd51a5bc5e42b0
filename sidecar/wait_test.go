package sidecar_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/cmd/devstack"
)

// The waits below that must end early are longer than the test client's
// 30 s timeout: a request that was not woken by the change fails instead
// of answering, late, the same workflow.

// awaitAnswer is one answer of GET /v1/workflows/{id}?wait=.
type awaitAnswer struct {
	r reply
	w workflow
}

// await starts n requests for wf?wait=wait as who, returns once the
// sidecar holds all of them, and answers them on the channel.
func (e *env) await(t *testing.T, who, wf, wait string, n int) <-chan awaitAnswer {
	t.Helper()
	before := e.st.Engine.Waiting()
	out := make(chan awaitAnswer, n)
	for range n {
		go func() {
			r := e.call(t, http.MethodGet, "/v1/workflows/"+wf+"?wait="+wait, who, nil)
			var w workflow
			if r.status == http.StatusOK {
				r.decode(t, &w)
			}
			out <- awaitAnswer{r, w}
		}()
	}
	for e.st.Engine.Waiting() < before+n {
		time.Sleep(time.Millisecond) // polling a condition, not waiting a fixed time
	}
	return out
}

// wantAnswer fails unless a is a 200 whose first step and its approval
// are in the given statuses.
func wantAnswer(t *testing.T, a awaitAnswer, stepStatus, approvalStatus string) {
	t.Helper()
	if a.r.status != http.StatusOK || len(a.w.Steps) == 0 {
		t.Fatalf("wait answered %d %s", a.r.status, a.r.body)
	}
	s := a.w.Steps[0]
	if s.Status != stepStatus || s.Approval == nil || s.Approval.Status != approvalStatus {
		t.Errorf("wait answered step %s, approval %+v; want %s, %s", s.Status, s.Approval, stepStatus, approvalStatus)
	}
}

// waitingRefund opens W1 for rep-ben with a $400 refund that waits for a
// lead, and returns its approval's id.
func (e *env) waitingRefund(t *testing.T) string {
	t.Helper()
	e.open(t, "rep-ben", "W1")
	r, s := e.propose(t, "rep-ben", "W1", "issue_refund", refund("O-1004", 40000))
	if r.status != http.StatusAccepted || s.Approval == nil {
		t.Fatalf("a $400 refund: %d %s, want 202 waiting_approval", r.status, r.body)
	}
	return s.Approval.ID
}

// An agent waiting on its workflow hears of a lead's approval, given in
// another request, and then of the step done by its resume.
func TestWaitAnswersWhenALeadApprovesAndWhenAStepRuns(t *testing.T) {
	e := start(t, devstack.Options{})
	id := e.waitingRefund(t)

	waiting := e.await(t, "rep-ben", "W1", "60s", 1)
	e.call(t, http.MethodPost, "/v1/approvals/"+id+"/approve", "lead-eli", nil).want(t, http.StatusOK, "")
	wantAnswer(t, <-waiting, "waiting_approval", "approved")

	// The step moves on twice, started then done: the wait answers the
	// first move it sees.
	waiting = e.await(t, "rep-ben", "W1", "60s", 1)
	resumed := make(chan reply, 1)
	go func() { resumed <- e.call(t, http.MethodPost, "/v1/workflows/W1/resume", "rep-ben", nil) }()
	a := <-waiting
	if a.r.status != http.StatusOK || len(a.w.Steps) != 1 || (a.w.Steps[0].Status != "started" && a.w.Steps[0].Status != "done") {
		t.Fatalf("wait answered %d %s; want the step started or done", a.r.status, a.r.body)
	}
	(<-resumed).want(t, http.StatusOK, "")
	if w := e.getWorkflow(t, "rep-ben", "W1"); w.Steps[0].Status != "done" || w.Status != "done" {
		t.Errorf("after resume: workflow %s, step %s; want both done", w.Status, w.Steps[0].Status)
	}
}

// A wait in which nothing changes ends with the workflow as it was.
func TestWaitEndsUnchanged(t *testing.T) {
	e := start(t, devstack.Options{})
	e.waitingRefund(t)
	before := e.call(t, http.MethodGet, "/v1/workflows/W1", "rep-ben", nil)
	before.want(t, http.StatusOK, "")
	a := <-e.await(t, "rep-ben", "W1", "1s", 1)
	wantAnswer(t, a, "waiting_approval", "pending")
	if string(a.r.body) != string(before.body) {
		t.Errorf("the workflow changed during a wait in which nothing happened:\nbefore %s\nafter  %s", before.body, a.r.body)
	}
	if n := e.st.Engine.Waiting(); n != 0 {
		t.Errorf("%d requests still registered as waiting", n)
	}
}

// A bad wait is refused before anything is read; a workflow the caller
// may not read is refused as without a wait, at once.
func TestWaitBadRequests(t *testing.T) {
	e := start(t, devstack.Options{})
	e.waitingRefund(t)
	for _, tc := range []struct {
		name, who, path string
		status          int
		code            string
	}{
		{"no unit", "rep-ben", "/v1/workflows/W1?wait=30", http.StatusBadRequest, "invalid_query"},
		{"empty", "rep-ben", "/v1/workflows/W1?wait=", http.StatusBadRequest, "invalid_query"},
		{"not a duration", "rep-ben", "/v1/workflows/W1?wait=soon", http.StatusBadRequest, "invalid_query"},
		{"over a minute", "rep-ben", "/v1/workflows/W1?wait=61s", http.StatusBadRequest, "invalid_query"},
		{"negative", "rep-ben", "/v1/workflows/W1?wait=-1s", http.StatusBadRequest, "invalid_query"},
		{"another rep's workflow", "rep-ana", "/v1/workflows/W1?wait=60s", http.StatusNotFound, "not_found"},
		{"no such workflow", "rep-ben", "/v1/workflows/W-none?wait=60s", http.StatusNotFound, "not_found"},
		{"no token", "", "/v1/workflows/W1?wait=60s", http.StatusUnauthorized, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.call(t, http.MethodGet, tc.path, tc.who, nil)
			r.want(t, tc.status, tc.code)
			if tc.code == "invalid_query" && !strings.Contains(r.errorOf(t).Message, "wait") {
				t.Errorf("message %q does not name wait", r.errorOf(t).Message)
			}
		})
	}
	// None at all is a wait that answers at once; a minute exactly is
	// the longest.
	e.call(t, http.MethodGet, "/v1/workflows/W1?wait=0s", "rep-ben", nil).want(t, http.StatusOK, "")
	waiting := e.await(t, "rep-ben", "W1", "1m", 1)
	e.call(t, http.MethodPost, "/v1/approvals/AP-1/reject", "lead-eli", nil).want(t, http.StatusOK, "")
	wantAnswer(t, <-waiting, "waiting_approval", "rejected")
}

// Many requests wait at once on two workflows, as the agent, a lead and
// an operator: a change to one wakes all of its waiters and none of the
// other's, and no request stays registered. Run with -race.
func TestWaitManyAtOnce(t *testing.T) {
	e := start(t, devstack.Options{})
	id := e.waitingRefund(t)
	e.open(t, "rep-ben", "W2")
	const each = 16
	var w1 []<-chan awaitAnswer
	for _, who := range []string{"rep-ben", "lead-eli", "ops-ida"} {
		w1 = append(w1, e.await(t, who, "W1", "60s", each))
	}
	w2 := e.await(t, "rep-ben", "W2", "2s", each)
	metrics := e.call(t, http.MethodGet, "/metrics", "", nil)
	if want := fmt.Sprintf("countersign_workflow_waiters %d\n", 4*each); !strings.Contains(string(metrics.body), want) {
		t.Errorf("/metrics does not show %q", want)
	}
	e.call(t, http.MethodPost, "/v1/approvals/"+id+"/approve", "lead-eli", nil).want(t, http.StatusOK, "")
	var wg sync.WaitGroup
	for _, ch := range w1 {
		for range each {
			wg.Go(func() { wantAnswer(t, <-ch, "waiting_approval", "approved") })
		}
	}
	wg.Wait()
	for range each {
		if a := <-w2; a.r.status != http.StatusOK || len(a.w.Steps) != 0 {
			t.Errorf("a wait on W2 answered %d %s", a.r.status, a.r.body)
		}
	}
	if n := e.st.Engine.Waiting(); n != 0 {
		t.Errorf("%d requests still registered as waiting", n)
	}
}

// A sidecar shutting down answers its waiting requests at once rather
// than holding the shutdown up for as long as they would wait.
func TestWaitEndsAtShutdown(t *testing.T) {
	e := start(t, devstack.Options{})
	e.waitingRefund(t)
	waiting := e.await(t, "rep-ben", "W1", "60s", 1)
	if err := e.st.Stack.Close(); err != nil {
		t.Fatal(err)
	}
	wantAnswer(t, <-waiting, "waiting_approval", "pending")
}

// read GETs path as who, with If-None-Match: ifNoneMatch unless it is "".
func (e *env) read(t *testing.T, who, path, ifNoneMatch string) reply {
	t.Helper()
	h := http.Header{"Authorization": {"Bearer " + e.st.Tokens[who]}}
	if ifNoneMatch != "" {
		h.Set("If-None-Match", ifNoneMatch)
	}
	return e.send(t, http.MethodGet, path, h, nil)
}

// etag is the strong ETag of a 200 or 304 answer of GET /v1/workflows/{id}.
func (r reply) etag(t *testing.T) string {
	t.Helper()
	tag := r.header.Get("ETag")
	if len(tag) < 3 || !strings.HasPrefix(tag, `"`) || !strings.HasSuffix(tag, `"`) {
		t.Fatalf("%d answered ETag %q, want a strong entity tag", r.status, tag)
	}
	return tag
}

// The ETag names the workflow's version: two reads of an unchanged
// workflow carry the same one, a read naming it in If-None-Match is 304
// with no body and the ETag again, and a lead's decision on the step's
// approval is a new version, which the same read then answers in full.
func TestETagNamesTheVersion(t *testing.T) {
	e := start(t, devstack.Options{})
	id := e.waitingRefund(t)
	first := e.read(t, "rep-ben", "/v1/workflows/W1", "")
	first.want(t, http.StatusOK, "")
	v1 := first.etag(t)
	if again := e.read(t, "rep-ben", "/v1/workflows/W1", ""); again.etag(t) != v1 || string(again.body) != string(first.body) {
		t.Errorf("an unchanged workflow read twice: ETag %s then %s", v1, again.etag(t))
	}
	for _, inm := range []string{v1, "W/" + v1, `"other", ` + v1, "*"} {
		r := e.read(t, "rep-ben", "/v1/workflows/W1", inm)
		if r.status != http.StatusNotModified || len(r.body) != 0 || r.etag(t) != v1 {
			t.Errorf("If-None-Match: %s on the unchanged workflow answered %d, ETag %s, body %q; want 304, %s, none", inm, r.status, r.header.Get("ETag"), r.body, v1)
		}
	}

	e.call(t, http.MethodPost, "/v1/approvals/"+id+"/approve", "lead-eli", nil).want(t, http.StatusOK, "")
	r := e.read(t, "rep-ben", "/v1/workflows/W1", v1)
	r.want(t, http.StatusOK, "")
	var w workflow
	r.decode(t, &w)
	if v2 := r.etag(t); v2 == v1 || w.Steps[0].Approval.Status != "approved" {
		t.Errorf("after the approval: ETag %s (before %s), approval %s; want a new version, approved", v2, v1, w.Steps[0].Approval.Status)
	}
	// Another reader (a lead, the operator) sees the same version.
	for _, who := range []string{"lead-eli", "ops-ida"} {
		if v := e.read(t, who, "/v1/workflows/W1", "").etag(t); v != r.etag(t) {
			t.Errorf("%s reads version %s, rep-ben %s", who, v, r.etag(t))
		}
	}
}

// A wait given a version the workflow has moved on from answers at once
// with the workflow as it stands: a decision made just before the wait
// began is not missed, however the version is given, and a version the
// sidecar never answered is as stale. The waits are longer than the test
// client's timeout: one that waited for a next change fails.
func TestWaitAnswersAtOnceForAChangeNotSeen(t *testing.T) {
	e := start(t, devstack.Options{})
	id := e.waitingRefund(t)
	before := e.read(t, "rep-ben", "/v1/workflows/W1", "").etag(t)
	e.call(t, http.MethodPost, "/v1/approvals/"+id+"/approve", "lead-eli", nil).want(t, http.StatusOK, "")
	now := e.read(t, "rep-ben", "/v1/workflows/W1", "").etag(t)
	for _, tc := range []struct{ name, query, ifNoneMatch string }{
		{"If-None-Match", "", before},
		{"since, as the ETag has it", "&since=" + url.QueryEscape(before), ""},
		{"since, without its quotes", "&since=" + strings.Trim(before, `"`), ""},
		{"a version never answered", "", `"not-a-version"`},
		{"since the start, any version", "&since=" + strings.Trim(before, `"`), `"not-a-version"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.read(t, "rep-ben", "/v1/workflows/W1?wait=60s"+tc.query, tc.ifNoneMatch)
			a := awaitAnswer{r: r}
			if r.status == http.StatusOK {
				r.decode(t, &a.w)
			}
			wantAnswer(t, a, "waiting_approval", "approved")
			if r.etag(t) != now {
				t.Errorf("ETag %s, want the version now, %s", r.etag(t), now)
			}
		})
	}
	if n := e.st.Engine.Waiting(); n != 0 {
		t.Errorf("%d requests still registered as waiting", n)
	}
}

// awaitVersion starts one wait for W1 as rep-ben given version (as
// If-None-Match) and returns once the sidecar holds it.
func (e *env) awaitVersion(t *testing.T, version, wait string) <-chan reply {
	t.Helper()
	out := make(chan reply, 1)
	go func() { out <- e.read(t, "rep-ben", "/v1/workflows/W1?wait="+wait, version) }()
	for e.st.Engine.Waiting() == 0 {
		time.Sleep(time.Millisecond) // polling a condition, not waiting a fixed time
	}
	return out
}

// A wait given the current version answers the next change the answer
// shows, with its new version, a status or not: an amended amount
// changes no status (a wait without a version waits on through it).
func TestWaitForTheNextVersion(t *testing.T) {
	e := start(t, devstack.Options{})
	e.waitingRefund(t)
	v1 := e.read(t, "rep-ben", "/v1/workflows/W1", "").etag(t)
	waiting := e.awaitVersion(t, v1, "60s")
	e.call(t, http.MethodPatch, "/v1/workflows/W1/steps/1", "rep-ben", map[string]any{"args": refund("O-1004", 39000)}).want(t, http.StatusOK, "")
	r := <-waiting
	r.want(t, http.StatusOK, "")
	var w workflow
	r.decode(t, &w)
	if r.etag(t) == v1 || w.Steps[0].Args["amount"] != float64(39000) {
		t.Errorf("the wait answered version %s (was %s), args %v; want a new version with the amended amount", r.etag(t), v1, w.Steps[0].Args)
	}
}

// A wait given the current version in which nothing changes ends with 304
// and no body when the version came as If-None-Match, and with the
// workflow as it was, in full, when it came as ?since= alone.
func TestWaitForAVersionEndsUnchanged(t *testing.T) {
	e := start(t, devstack.Options{})
	e.waitingRefund(t)
	before := e.read(t, "rep-ben", "/v1/workflows/W1", "")
	v := before.etag(t)
	if r := <-e.awaitVersion(t, v, "1s"); r.status != http.StatusNotModified || len(r.body) != 0 || r.etag(t) != v {
		t.Errorf("If-None-Match %s, nothing changed: %d, ETag %s, body %q; want 304, the same ETag, no body", v, r.status, r.header.Get("ETag"), r.body)
	}
	r := e.read(t, "rep-ben", "/v1/workflows/W1?wait=1s&since="+url.QueryEscape(v), "")
	r.want(t, http.StatusOK, "")
	if r.etag(t) != v || string(r.body) != string(before.body) {
		t.Errorf("since=%s, nothing changed: ETag %s, body\n%s\nwant the same version and body\n%s", v, r.etag(t), r.body, before.body)
	}
	if n := e.st.Engine.Waiting(); n != 0 {
		t.Errorf("%d requests still registered as waiting", n)
	}
}
