package sidecar_test

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/countersign/countersign/cmd/devstack"
)

// workflowsPage is GET /v1/workflows's answer, decoded.
type workflowsPage struct {
	Workflows []struct {
		ID        string `json:"id"`
		User      string `json:"user"`
		Status    string `json:"status"`
		StepCount int    `json:"step_count"`
		Steps     []step `json:"steps"`
	} `json:"workflows"`
	NextCursor *string `json:"next_cursor"`
}

// listAll follows next_cursor from the first page of GET
// /v1/workflows?query as who, and returns the ids in the order the pages
// gave them and how many pages there were.
func (e *env) listAll(t *testing.T, who string, query url.Values) (ids []string, pages int) {
	t.Helper()
	for pages = 1; pages <= 100; pages++ {
		r := e.call(t, http.MethodGet, "/v1/workflows?"+query.Encode(), who, nil)
		r.want(t, http.StatusOK, "")
		var p workflowsPage
		r.decode(t, &p)
		if p.NextCursor == nil || p.Workflows == nil {
			t.Fatalf("an answer without workflows or next_cursor: %s", r.body)
		}
		for _, w := range p.Workflows {
			if w.Steps != nil {
				t.Errorf("workflow %s is listed with its steps", w.ID)
			}
			ids = append(ids, w.ID)
		}
		if *p.NextCursor == "" {
			return ids, pages
		}
		query.Set("cursor", *p.NextCursor)
	}
	t.Fatal("more than 100 pages")
	return nil, 0
}

// A rep lists their own workflows, a page at a time, in the order they
// were opened, and never another rep's; a lead and an operator list them
// all; status selects.
func TestListWorkflows(t *testing.T) {
	e := start(t, devstack.Options{})
	var ana, ben, all []string
	for i := range 7 {
		id := fmt.Sprintf("W-ana-%d", 7-i) // ids against the order of creation
		e.open(t, "rep-ana", id)
		ana, all = append(ana, id), append(all, id)
		if i%3 == 0 {
			id := fmt.Sprintf("W-ben-%d", i)
			e.open(t, "rep-ben", id)
			ben, all = append(ben, id), append(all, id)
		}
	}
	// One of ana's waits for a lead, one of ben's has run a step.
	if r, _ := e.propose(t, "rep-ana", "W-ana-5", "issue_refund", refund("O-1002", 12000)); r.status != http.StatusAccepted {
		t.Fatalf("a $120 refund: %d %s, want 202", r.status, r.body)
	}
	if r, _ := e.propose(t, "rep-ben", "W-ben-3", "lookup_order", map[string]any{"order": "O-1004"}); r.status != http.StatusOK {
		t.Fatalf("a lookup: %d %s, want 200", r.status, r.body)
	}
	for _, tc := range []struct {
		name  string
		who   string
		query url.Values
		want  []string
		pages int
	}{
		{"a rep's own, over three pages", "rep-ana", url.Values{"limit": {"3"}}, ana, 3},
		{"another rep's own", "rep-ben", url.Values{"limit": {"2"}}, ben, 2},
		{"a rep with none", "rep-cy", url.Values{}, nil, 1},
		{"an operator's: all of them", "ops-ida", url.Values{"limit": {"4"}}, all, 3},
		{"a lead's: all of them, read-only", "lead-eli", url.Values{}, all, 1},
		{"a rep's waiting for a lead", "rep-ana", url.Values{"status": {"waiting_approval"}}, []string{"W-ana-5"}, 1},
		{"another rep's waiting for a lead: none", "rep-ben", url.Values{"status": {"waiting_approval"}}, nil, 1},
		{"done ones, for an operator", "ops-ida", url.Values{"status": {"done"}, "limit": {"1"}}, []string{"W-ben-3"}, 1},
		{"running ones, for a rep, a page of one at a time", "rep-ben", url.Values{"status": {"running"}, "limit": {"1"}},
			[]string{"W-ben-0", "W-ben-6"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, pages := e.listAll(t, tc.who, tc.query)
			if !slices.Equal(got, tc.want) || pages != tc.pages {
				t.Errorf("listed %v in %d pages, want %v in %d", got, pages, tc.want, tc.pages)
			}
		})
	}
	// Each workflow is listed as it is read, with the number of its steps.
	r := e.call(t, http.MethodGet, "/v1/workflows?status=waiting_approval", "ops-ida", nil)
	var p workflowsPage
	r.decode(t, &p)
	if len(p.Workflows) != 1 || p.Workflows[0].User != "rep-ana" || p.Workflows[0].StepCount != 1 {
		t.Errorf("the waiting workflow listed as %s", r.body)
	}
}

// The default page is 50 workflows; a page may hold up to 500.
func TestListWorkflowsPageSizes(t *testing.T) {
	e := start(t, devstack.Options{})
	for i := range 51 {
		e.open(t, "rep-ana", fmt.Sprintf("W-%02d", i))
	}
	for _, tc := range []struct {
		query string
		n     int
		more  bool
	}{
		{"", 50, true},
		{"limit=500", 51, false},
		{"limit=51", 51, false},
		{"limit=50", 50, true},
	} {
		r := e.call(t, http.MethodGet, "/v1/workflows?"+tc.query, "rep-ana", nil)
		r.want(t, http.StatusOK, "")
		var p workflowsPage
		r.decode(t, &p)
		if len(p.Workflows) != tc.n || (*p.NextCursor != "") != tc.more {
			t.Errorf("?%s: %d workflows, next_cursor %q; want %d, more %v", tc.query, len(p.Workflows), *p.NextCursor, tc.n, tc.more)
		}
	}
}

// Parameters that do not parse are refused, naming the parameter; an
// unknown status names the ones there are.
func TestListWorkflowsBadParameters(t *testing.T) {
	e := start(t, devstack.Options{})
	for _, tc := range []struct {
		query  string
		status int
		code   string
		names  string
	}{
		{"status=approved", http.StatusBadRequest, "invalid_query", "running, waiting_approval, paused, needs_reconciliation, done, failed"},
		{"status=Running", http.StatusBadRequest, "invalid_query", "status"},
		{"limit=0", http.StatusBadRequest, "invalid_query", "limit"},
		{"limit=501", http.StatusBadRequest, "invalid_query", "limit"},
		{"limit=ten", http.StatusBadRequest, "invalid_query", "limit"},
		{"cursor=not-a-cursor", http.StatusBadRequest, "invalid_query", "cursor"},
		{"cursor=AAAAAAAAAAA", http.StatusBadRequest, "invalid_query", "cursor"}, // the number 0: no page ends there
	} {
		t.Run(tc.query, func(t *testing.T) {
			r := e.call(t, http.MethodGet, "/v1/workflows?"+tc.query, "rep-ana", nil)
			r.want(t, tc.status, tc.code)
			if msg := r.errorOf(t).Message; !strings.Contains(msg, tc.names) {
				t.Errorf("message %q does not name %q", msg, tc.names)
			}
		})
	}
	e.call(t, http.MethodGet, "/v1/workflows", "", nil).want(t, http.StatusUnauthorized, "")
}
