package crash_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/countersign/countersign/executor/pgtest"
	"github.com/countersign/countersign/tests/procs"
)

// TestKillWhileOpening kills a real process with SIGKILL inside the
// transaction that opens a workflow with its first step (POST
// /v1/workflows/{id}/steps with a ticket), at the failpoint after_open,
// where the workflow is written and the step not yet: the restarted
// process has neither, and the same request then opens the workflow with
// its step 1, one refund. On both backends.
func TestKillWhileOpening(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and kills a real process per backend; run without -short")
	}
	bin := procs.Build(t)
	const body = `{"ticket":"T-open","tool":"issue_refund","args":{"order":"O-1001","amount":3000}}`
	const path = "/v1/workflows/" + workflowID + "/steps"
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			if b.name != "bbolt" {
				pgtest.URL(t) // skip the backend in one line without PostgreSQL
			}
			dir, store := t.TempDir(), b.flags(t, bin)
			first := start(t, bin, dir, store, []string{"COUNTERSIGN_FAILPOINT=after_open"})
			before := first.effects(t, "refund")
			if res, err := first.do(http.MethodPost, path, body); err == nil {
				b, _ := io.ReadAll(res.Body)
				res.Body.Close()
				t.Fatalf("the request answered %d %s; the process should have died at after_open", res.StatusCode, b)
			}
			first.wantKilled(t)
			if !strings.Contains(first.out.String(), "failpoint after_open reached") {
				t.Fatal("the process died without reporting failpoint after_open: the kill did not land there")
			}

			second := start(t, bin, dir, store, nil)
			second.call(t, http.MethodGet, "/v1/workflows/"+workflowID, "", http.StatusNotFound, nil)
			var s struct {
				N      int
				Status string
			}
			second.call(t, http.MethodPost, path, body, http.StatusOK, &s)
			if s.N != 1 || s.Status != "done" {
				t.Errorf("the same request after the crash: step %d %s, want step 1 done", s.N, s.Status)
			}
			if n := second.effects(t, "refund") - before; n != 1 {
				t.Errorf("%d refunds, want 1", n)
			}
			second.verifyAudit(t)
			second.stop(t)
		})
	}
}
