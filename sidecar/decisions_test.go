package sidecar_test

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/cmd/devstack"
)

// decisionPage is GET /v1/decisions as a client reads it.
type decisionPage struct {
	Decisions []struct {
		DecisionID string    `json:"decision_id"`
		Timestamp  time.Time `json:"timestamp"`
		Workflow   string    `json:"workflow"`
		N          int       `json:"n"`
	} `json:"decisions"`
	NextCursor *string `json:"next_cursor"`
}

// steps names the page's decisions by workflow and step.
func (p decisionPage) steps() []string {
	out := []string{}
	for _, d := range p.Decisions {
		out = append(out, fmt.Sprintf("%s/%d", d.Workflow, d.N))
	}
	return out
}

// Four decisions a minute apart in two workflows, read back by workflow,
// by time and a page at a time, by an operator and by a lead.
func TestDecisionLogQuery(t *testing.T) {
	clock := newManualClock()
	e := start(t, devstack.Options{Clock: clock})
	t0 := clock.Now()
	e.open(t, "rep-ana", "W-a")
	e.open(t, "rep-ana", "W-b")
	for i, c := range []struct {
		wf    string
		order string
	}{{"W-a", "O-1001"}, {"W-b", "O-1001"}, {"W-a", "O-1002"}, {"W-b", "O-1002"}} {
		clock.Set(t0.Add(time.Duration(i) * time.Minute))
		r, _ := e.propose(t, "rep-ana", c.wf, "issue_refund", refund(c.order, 1000))
		r.want(t, http.StatusOK, "")
	}
	at := func(m int) string { return t0.Add(time.Duration(m) * time.Minute).Format(time.RFC3339Nano) }

	for _, tc := range []struct {
		name  string
		query url.Values
		want  []string
	}{
		{"everything", nil, []string{"W-a/1", "W-b/1", "W-a/2", "W-b/2"}},
		{"one workflow", url.Values{"workflow": {"W-a"}}, []string{"W-a/1", "W-a/2"}},
		{"since, inclusive", url.Values{"since": {at(1)}}, []string{"W-b/1", "W-a/2", "W-b/2"}},
		{"until, exclusive", url.Values{"until": {at(2)}}, []string{"W-a/1", "W-b/1"}},
		{"since, until and a workflow", url.Values{"since": {at(1)}, "until": {at(3)}, "workflow": {"W-b"}}, []string{"W-b/1"}},
		{"nothing in the window", url.Values{"since": {at(10)}}, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, who := range []string{"ops-ida", "lead-dee"} {
				r := e.call(t, http.MethodGet, "/v1/decisions?"+tc.query.Encode(), who, nil)
				r.want(t, http.StatusOK, "")
				var p decisionPage
				r.decode(t, &p)
				if !slices.Equal(p.steps(), tc.want) || p.NextCursor == nil || *p.NextCursor != "" {
					t.Errorf("%s: %v next %v, want %v and an empty next_cursor; %s", who, p.steps(), p.NextCursor, tc.want, r.body)
				}
			}
		})
	}

	// A page at a time: three, then the one left.
	var first, second decisionPage
	e.call(t, http.MethodGet, "/v1/decisions?limit=3", "ops-ida", nil).decode(t, &first)
	if got := first.steps(); !slices.Equal(got, []string{"W-a/1", "W-b/1", "W-a/2"}) || first.NextCursor == nil || *first.NextCursor == "" {
		t.Fatalf("first page %v, next %v", got, first.NextCursor)
	}
	e.call(t, http.MethodGet, "/v1/decisions?limit=3&cursor="+url.QueryEscape(*first.NextCursor), "ops-ida", nil).decode(t, &second)
	if got := second.steps(); !slices.Equal(got, []string{"W-b/2"}) || *second.NextCursor != "" {
		t.Fatalf("second page %v, next %q", got, *second.NextCursor)
	}
	if d := second.Decisions[0]; d.DecisionID == "" || !d.Timestamp.Equal(t0.Add(3*time.Minute)) {
		t.Errorf("decision %+v, want an id and the time it was made", d)
	}
}

// A parameter that does not parse or is out of bounds is a 400 that names
// it and says what it takes.
func TestDecisionLogQueryRefusals(t *testing.T) {
	e := start(t, devstack.Options{})
	for _, tc := range []struct {
		query string
		names string
	}{
		{"limit=0", "limit"},
		{"limit=-1", "limit"},
		{"limit=1001", "limit"},
		{"limit=ten", "limit"},
		{"limit=1.5", "limit"},
		{"since=yesterday", "since"},
		{"since=2026-11-29", "since"},
		{"until=2026-13-01T00:00:00Z", "until"},
		{"cursor=%21%21%21", "cursor"},
		{"cursor=AAAAAAAAAAA", "cursor"}, // sequence number 0, which no decision has
		{"cursor=AAAA", "cursor"},
	} {
		t.Run(tc.query, func(t *testing.T) {
			r := e.call(t, http.MethodGet, "/v1/decisions?"+tc.query, "ops-ida", nil)
			r.want(t, http.StatusBadRequest, "invalid_query")
			msg := r.errorOf(t).Message
			if !strings.HasPrefix(msg, tc.names+":") || tc.names == "limit" && !strings.Contains(msg, "from 1 to 1000") {
				t.Errorf("message %q does not name %s and its bounds", msg, tc.names)
			}
		})
	}
	// At the bounds a limit is accepted.
	for _, q := range []string{"limit=1", "limit=1000", "limit="} {
		e.call(t, http.MethodGet, "/v1/decisions?"+q, "ops-ida", nil).want(t, http.StatusOK, "")
	}
}

// A decision names the audit record that covers it: on one sidecar the
// record's id, made in the decision's transaction, a decision record of
// the same step with the same rule.
func TestDecisionNamesItsAuditRecord(t *testing.T) {
	e := start(t, devstack.Options{})
	e.open(t, "rep-ana", "W-a")
	r, _ := e.propose(t, "rep-ana", "W-a", "issue_refund", refund("O-1001", 1000))
	r.want(t, http.StatusOK, "")
	var decisions struct {
		Decisions []struct {
			N     int    `json:"n"`
			Rule  string `json:"rule"`
			Audit string `json:"audit"`
		} `json:"decisions"`
	}
	e.call(t, http.MethodGet, "/v1/decisions?workflow=W-a", "ops-ida", nil).decode(t, &decisions)
	if len(decisions.Decisions) != 1 || decisions.Decisions[0].Audit == "" {
		t.Fatalf("W-a's decisions %+v, want one naming its audit record", decisions.Decisions)
	}
	d := decisions.Decisions[0]
	var page struct {
		Records []struct {
			ID, Kind, Workflow string
			N                  int
			Detail             map[string]any
		} `json:"records"`
	}
	e.call(t, http.MethodGet, "/v1/audit?limit=1000", "ops-ida", nil).decode(t, &page)
	for _, rec := range page.Records {
		if rec.ID == d.Audit {
			if rec.Kind != "decision" || rec.Workflow != "W-a" || rec.N != d.N || rec.Detail["rule"] != d.Rule {
				t.Errorf("the decision's audit record %s is %+v, want W-a/%d's decision by %s", d.Audit, rec, d.N, d.Rule)
			}
			return
		}
	}
	t.Errorf("no audit record has the decision's audit id %s", d.Audit)
}
