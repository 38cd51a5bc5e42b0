package sidecar_test

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"net/http"
	"strings"
	"testing"

	"github.com/countersign/countersign/bundles"
	"github.com/countersign/countersign/bundles/loosen"
	"github.com/countersign/countersign/cmd/devstack"
)

// p1DataWith is p1's data.json with edit applied to data.countersign.
func p1DataWith(t *testing.T, edit func(cs map[string]any)) string {
	t.Helper()
	fsys, err := bundles.Open("p1")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := fs.ReadFile(fsys, "data.json")
	if err != nil {
		t.Fatal(err)
	}
	var data map[string]map[string]any
	if err := json.Unmarshal(raw, &data); err != nil {
		t.Fatal(err)
	}
	edit(data["countersign"])
	out, err := json.Marshal(data)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// review is what the awaiting record, GET /v1/bundles/{digest} and a dry
// run show a second operator.
type review struct {
	Status         string   `json:"status"`
	Digest         string   `json:"digest"`
	SecondOperator []string `json:"second_operator"`
	Diff           []struct {
		Path          string `json:"path"`
		Change        string `json:"change"`
		PolicyChanged bool   `json:"policy_changed"`
		Unified       string `json:"unified"`
	} `json:"diff"`
	DataDiff []struct {
		Path   string          `json:"path"`
		Old    json.RawMessage `json:"old"`
		New    json.RawMessage `json:"new"`
		Change string          `json:"change"`
	} `json:"data_diff"`
	NewAllowances struct {
		Count     int `json:"count"`
		Evaluated int `json:"evaluated"`
		Examples  []struct {
			Kind  string `json:"kind"`
			Input struct {
				User struct {
					ID string `json:"id"`
				} `json:"user"`
				Args struct {
					Order  string `json:"order"`
					Amount int64  `json:"amount"`
				} `json:"args"`
				Approver struct {
					ID string `json:"id"`
				} `json:"approver"`
			} `json:"input"`
			Active    struct{ Decision, Rule string } `json:"active"`
			Candidate struct{ Decision, Rule string } `json:"candidate"`
		} `json:"examples"`
	} `json:"new_allowances"`
	Impact *struct {
		Replayed int `json:"replayed"`
	} `json:"impact"`
}

// TestOneOperatorCannotLoosen: over the API, as one operator, each bundle
// that keeps p1's limits but lets more through waits for a second
// operator, and the awaiting answer, the record and a dry run show what it
// would let through. Nothing it would allow pays meanwhile. (On a sidecar
// that compared limits only, each went live at once: 201.)
func TestOneOperatorCannotLoosen(t *testing.T) {
	e := start(t, devstack.Options{})
	ana := packed(t, p1Edited(t, "p1-ana", loosen.AllowAnaOnO1002, nil))
	tests := []struct {
		name    string
		archive []byte
		check   func(t *testing.T, r review)
	}{
		{"an allow rule for rep-ana on O-1002 from $450", ana, func(t *testing.T, r review) {
			if r.NewAllowances.Count == 0 {
				t.Fatalf("no new allowances: %+v", r.NewAllowances)
			}
			for _, ex := range r.NewAllowances.Examples {
				if ex.Input.User.ID != "rep-ana" || ex.Input.Args.Order != "O-1002" || ex.Input.Args.Amount < 45000 || ex.Candidate.Decision != "ALLOW" {
					t.Errorf("example %+v does not name rep-ana's refund of O-1002 from $450", ex)
				}
			}
			if len(r.Diff) != 1 || r.Diff[0].Path != "/call/call.rego" || !r.Diff[0].PolicyChanged ||
				!strings.Contains(r.Diff[0].Unified, "+\tinput.user.id == \"rep-ana\"\n") {
				t.Errorf("diff %+v", r.Diff)
			}
		}},
		{"R7 spares rep-ben", packed(t, p1Edited(t, "p1-ben", loosen.SpareBen, nil)), func(t *testing.T, r review) {
			if r.NewAllowances.Count == 0 || r.NewAllowances.Examples[0].Input.User.ID != "rep-ben" ||
				r.NewAllowances.Examples[0].Active.Rule != "R7-refund-needs-approval" {
				t.Errorf("new allowances %+v", r.NewAllowances)
			}
		}},
		{"the approver rules accept rep-ana", packed(t, p1Edited(t, "p1-lead-ana", func(s string) string { return s }, map[string]string{
			"approver/approver.rego": strings.Replace(p1File(t, "approver/approver.rego"), `lead if input.approver.role == "lead"`,
				"lead if input.approver.role == \"lead\"\n\nlead if input.approver.id == \"rep-ana\"", 1),
		})), func(t *testing.T, r review) {
			if r.NewAllowances.Count == 0 || r.NewAllowances.Examples[0].Kind != "approver" || r.NewAllowances.Examples[0].Input.Approver.ID != "rep-ana" {
				t.Errorf("new allowances %+v", r.NewAllowances)
			}
		}},
		{"the breaker and the bounds at 2^31-1", packed(t, p1Edited(t, "p1-unbounded", func(s string) string { return s }, map[string]string{
			"data.json": p1DataWith(t, func(cs map[string]any) {
				cs["breaker"] = map[string]any{"max_failures": 2147483647, "window_seconds": 600}
				cs["bounds"] = map[string]any{"max_steps": 2147483647, "max_spend": 2147483647, "deadline_seconds": 2147483647, "max_attempts": 2147483647}
			}),
		})), func(t *testing.T, r review) {
			var paths []string
			for _, d := range r.DataDiff {
				if d.Change == "added" {
					paths = append(paths, d.Path)
				}
			}
			if want := "data.countersign.bounds.deadline_seconds data.countersign.bounds.max_attempts data.countersign.bounds.max_spend " +
				"data.countersign.bounds.max_steps data.countersign.breaker.max_failures data.countersign.breaker.window_seconds"; strings.Join(paths, " ") != want {
				t.Errorf("data diff %+v, want the bounds and breaker added", r.DataDiff)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := e.uploadAs(t, "", bytes.NewReader(tt.archive))
			up.want(t, http.StatusAccepted, "")
			var r review
			up.decode(t, &r)
			if r.Status != "awaiting_second_operator" || len(r.SecondOperator) == 0 || r.Impact == nil {
				t.Errorf("answer %s", up.body)
			}
			tt.check(t, r)

			var rec review
			e.call(t, http.MethodGet, "/v1/bundles/"+r.Digest, "ops-jon", nil).decode(t, &rec)
			if rec.Status != "awaiting_second_operator" || rec.NewAllowances.Count != r.NewAllowances.Count || len(rec.Diff) != len(r.Diff) {
				t.Errorf("GET /v1/bundles/%s: %+v, want the awaiting record as answered", r.Digest, rec)
			}
			var dry review
			e.uploadAs(t, "?dry_run=true", bytes.NewReader(tt.archive)).decode(t, &dry)
			if dry.NewAllowances.Count != r.NewAllowances.Count || len(dry.SecondOperator) == 0 {
				t.Errorf("dry run: %+v", dry)
			}
			e.activeRevision(t, "p1")
		})
	}

	// Meanwhile rep-ana's $480 refunds of O-1002 wait for a lead.
	e.open(t, "rep-ana", "W-480")
	r, s := e.propose(t, "rep-ana", "W-480", "issue_refund", refund("O-1002", 48000))
	if r.status != http.StatusAccepted || s.Status != "waiting_approval" {
		t.Errorf("$480 refund of O-1002 under p1: %d %s", r.status, r.body)
	}

	// The second operator approves the rule: it goes live.
	var aw review
	e.uploadAs(t, "", bytes.NewReader(ana)).decode(t, &aw)
	e.call(t, http.MethodPost, "/v1/bundles/"+aw.Digest+"/approve", "ops-ida", nil).want(t, http.StatusForbidden, "same_operator")
	e.call(t, http.MethodPost, "/v1/bundles/"+aw.Digest+"/approve", "ops-jon", nil).want(t, http.StatusCreated, "")
	e.activeRevision(t, "p1-ana")

	e.call(t, http.MethodGet, "/v1/bundles/"+strings.Repeat("0", 64), "ops-ida", nil).want(t, http.StatusNotFound, "not_found")
	e.call(t, http.MethodGet, "/v1/bundles/"+aw.Digest, "rep-ana", nil).want(t, http.StatusForbidden, "")
}

// TestATighteningGoesLiveOnOneOperator: a pure tightening (refund_auto
// $50 → $40, declared) is active at once; rolling back through /activate
// to p1, looser, waits for a second operator, who approves it.
func TestATighteningGoesLiveOnOneOperator(t *testing.T) {
	e := start(t, devstack.Options{})
	var p1 struct{ Digest string }
	e.call(t, http.MethodGet, "/v1/bundles/active", "ops-ida", nil).decode(t, &p1)

	tight := packed(t, p1Edited(t, "p1-tight", func(s string) string { return s }, map[string]string{
		"data.json": p1DataWith(t, func(cs map[string]any) { cs["limits"].(map[string]any)["refund_auto"] = 4000 }),
		".manifest": `{"revision": "p1-tight", "roots": ["countersign"], "rego_version": 1,
			"metadata": {"limit_changes": [{"name": "refund_auto", "from": 5000, "to": 4000}]}}`,
	}))
	e.uploadAs(t, "", bytes.NewReader(tight)).want(t, http.StatusCreated, "")
	e.activeRevision(t, "p1-tight")

	r := e.call(t, http.MethodPost, "/v1/bundles/"+p1.Digest+"/activate", "ops-ida", nil)
	r.want(t, http.StatusAccepted, "")
	var aw review
	r.decode(t, &aw)
	if len(aw.DataDiff) != 1 || aw.DataDiff[0].Path != "data.countersign.limits.refund_auto" || aw.DataDiff[0].Change != "loosens" ||
		string(aw.DataDiff[0].Old) != "4000" || string(aw.DataDiff[0].New) != "5000" || aw.NewAllowances.Count == 0 {
		t.Errorf("rollback to p1: %s", r.body)
	}
	e.activeRevision(t, "p1-tight")
	e.call(t, http.MethodPost, "/v1/bundles/"+p1.Digest+"/approve", "ops-jon", nil).want(t, http.StatusCreated, "")
	e.activeRevision(t, "p1")
}

func (e *env) activeRevision(t *testing.T, want string) {
	t.Helper()
	var b struct{ Revision string }
	e.call(t, http.MethodGet, "/v1/bundles/active", "ops-ida", nil).decode(t, &b)
	if b.Revision != want {
		t.Fatalf("active bundle %s, want %s", b.Revision, want)
	}
}

func p1File(t *testing.T, name string) string {
	t.Helper()
	fsys, err := bundles.Open("p1")
	if err != nil {
		t.Fatal(err)
	}
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The history lists every record without its review, which may weigh a
// megabyte of diffs; the record by digest has it.
func TestHistoryLeavesReviewsToTheRecord(t *testing.T) {
	e := start(t, devstack.Options{})
	r := e.uploadAs(t, "", bytes.NewReader(packed(t, p1Edited(t, "p1-ben", loosen.SpareBen, nil))))
	r.want(t, http.StatusAccepted, "")
	var aw review
	r.decode(t, &aw)
	var h []map[string]json.RawMessage
	e.call(t, http.MethodGet, "/v1/bundles", "ops-ida", nil).decode(t, &h)
	for _, rec := range h {
		if _, ok := rec["diff"]; ok {
			t.Errorf("the history lists a review: %s", rec["revision"])
		}
	}
	var rec review
	e.call(t, http.MethodGet, "/v1/bundles/"+aw.Digest, "ops-ida", nil).decode(t, &rec)
	if len(rec.Diff) != 1 {
		t.Errorf("the record by digest: %+v", rec)
	}
}
