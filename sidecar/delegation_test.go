package sidecar_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/countersign/countersign/cmd/devstack"
	"github.com/countersign/countersign/executor/fixture"
)

// mint signs a token of the dev identity provider for rep-ana with her
// claims changed by edit, valid for ttl from the stack's clock.
func (e *env) mint(t *testing.T, ttl time.Duration, edit func(*fixture.Person)) string {
	t.Helper()
	p := person(t, "rep-ana")
	edit(&p)
	tok, err := e.st.IdP.Sign(p, ttl)
	if err != nil {
		t.Fatalf("sign a token for %s: %v", p.ID, err)
	}
	return tok
}

// callWith is call with a bearer token given as is.
func (e *env) callWith(t *testing.T, method, path, token string, body any) reply {
	t.Helper()
	h := http.Header{"Authorization": {"Bearer " + token}}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
		h.Set("Content-Type", "application/json")
	}
	return e.send(t, method, path, h, rd)
}

// notedStep is a step with the note that says why it stands where it does.
type notedStep struct {
	Status string `json:"status"`
	Rule   string `json:"rule"`
	Note   string `json:"note"`
}

func (r reply) steps(t *testing.T) []notedStep {
	t.Helper()
	var w struct {
		Steps []notedStep `json:"steps"`
	}
	r.decode(t, &w)
	return w.Steps
}

// shipments counts the order system's shipments of order.
func (e *env) shipments(t *testing.T, order string) int {
	t.Helper()
	var sh struct{ Shipments []json.RawMessage }
	json.Unmarshal(e.sim(t, http.MethodGet, e.st.Endpoints.Orders+"/orders/"+order+"/shipments", nil, http.StatusOK), &sh)
	return len(sh.Shipments)
}

// A workflow opened with rep-ana's full token runs each later call under
// the narrower of that delegation and the token presented with the call,
// and not past the delegation's expiry.
func TestDelegationFollowsThePresentingToken(t *testing.T) {
	clock := newManualClock()
	e := start(t, devstack.Options{Clock: clock})

	t.Run("a token with only the lookup scope and no ceiling is denied the refund", func(t *testing.T) {
		e.open(t, "rep-ana", "W-narrow")
		narrow := e.mint(t, time.Hour, func(p *fixture.Person) { p.Scopes, p.RefundCeiling = []string{"lookup"}, 0 })
		r := e.callWith(t, http.MethodPost, "/v1/workflows/W-narrow/steps", narrow,
			map[string]any{"tool": "issue_refund", "args": refund("O-1001", 3000)})
		r.want(t, http.StatusForbidden, "policy_denied")
		if rule := r.errorOf(t).Rule; rule != "R1-scope-not-delegated" {
			t.Errorf("rule %q, want R1-scope-not-delegated", rule)
		}
		e.wantLedger(t, 0)
	})

	t.Run("a token claiming another region is denied the reship by R2", func(t *testing.T) {
		e.open(t, "rep-ana", "W-region")
		us := e.mint(t, time.Hour, func(p *fixture.Person) { p.Region = "US" })
		before := e.shipments(t, "O-1001")
		r := e.callWith(t, http.MethodPost, "/v1/workflows/W-region/steps", us,
			map[string]any{"tool": "reship_order", "args": map[string]string{"order": "O-1001"}})
		r.want(t, http.StatusForbidden, "policy_denied")
		if rule := r.errorOf(t).Rule; rule != "R2-order-outside-region" {
			t.Errorf("rule %q, want R2-order-outside-region", rule)
		}
		if n := e.shipments(t, "O-1001"); n != before {
			t.Errorf("%d shipments of O-1001, want %d", n, before)
		}
	})

	t.Run("past the creating token's expiry the step is held until a fresh token resumes it", func(t *testing.T) {
		short := e.mint(t, time.Minute, func(*fixture.Person) {})
		e.callWith(t, http.MethodPost, "/v1/workflows", short, map[string]string{"id": "W-expiry", "ticket": "T-expiry"}).
			want(t, http.StatusCreated, "")
		r := e.callWith(t, http.MethodPost, "/v1/workflows/W-expiry/steps", short,
			map[string]any{"tool": "issue_refund", "args": refund("O-1002", 12000)})
		r.want(t, http.StatusAccepted, "")
		var s step
		r.decode(t, &s)
		if s.Status != "waiting_approval" || s.Approval == nil {
			t.Fatalf("step %s, want waiting_approval", r.body)
		}
		e.call(t, http.MethodPost, "/v1/approvals/"+s.Approval.ID+"/approve", "lead-dee", nil).want(t, http.StatusOK, "")

		clock.Advance(2 * time.Minute)
		e.callWith(t, http.MethodPost, "/v1/workflows/W-expiry/resume", short, nil).want(t, http.StatusUnauthorized, "token_expired")
		r = e.call(t, http.MethodPost, "/v1/workflows/W-expiry/resume", "ops-ida", nil)
		r.want(t, http.StatusOK, "")
		if got := r.steps(t); got[0].Status != "held" || got[0].Note != "delegation_expired" {
			t.Fatalf("after an operator's resume: step %+v, want held with note delegation_expired", got[0])
		}
		e.wantLedger(t, 0)

		fresh := e.mint(t, time.Hour, func(*fixture.Person) {})
		r = e.callWith(t, http.MethodPost, "/v1/workflows/W-expiry/resume", fresh, nil)
		r.want(t, http.StatusOK, "")
		if got := r.steps(t); got[0].Status != "done" {
			t.Fatalf("after the agent's resume with a fresh token: step %+v, want done", got[0])
		}
		if l := e.wantLedger(t, 1); l[0].Amount != 12000 {
			t.Errorf("ledger %+v, want one refund of 12000", l)
		}
	})
}
