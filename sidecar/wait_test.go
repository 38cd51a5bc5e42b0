package sidecar_test

import (
	"fmt"
	"net/http"
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
