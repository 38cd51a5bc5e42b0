package fleet_test

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"testing"
	"testing/fstest"

	"github.com/countersign/countersign/bundles"
	"github.com/countersign/countersign/executor/policy"
)

// TestRepDailyCapShared: a rep's daily cap is one total across the fleet.
// Under p1 with the cap tightened to $500 (activated through A; the
// gate's cases hold it to at least the $500 maximum refund), a $49 refund
// through A and a $400 one through B (approved through C) spend $449 of
// it; the next $60 refund is denied under R5 whichever of the three
// sidecars receives it.
func TestRepDailyCapShared(t *testing.T) {
	f := newFleet(t, 3)
	a, b, c := f.procs[0], f.procs[1], f.procs[2]
	rep, lead, ops := f.tokens["rep-ana"], f.tokens["lead-dee"], f.tokens["ops-ida"]
	a.uploadArchive(t, ops, tightCap(t, 50000), http.StatusCreated)

	refund := func(p *proc, wf, order string, cents, want int) step {
		t.Helper()
		p.call(t, rep, http.MethodPost, "/v1/workflows", `{"id":"`+wf+`","ticket":"T-`+wf+`"}`, http.StatusCreated, nil)
		var s step
		p.call(t, rep, http.MethodPost, "/v1/workflows/"+wf+"/steps",
			fmt.Sprintf(`{"tool":"issue_refund","args":{"order":%q,"amount":%d}}`, order, cents), want, &s)
		return s
	}
	if s := refund(a, "W-cap-a", "O-1001", 4900, http.StatusOK); s.Status != "done" {
		t.Fatalf("$49 through A: %+v, want done", s)
	}
	s := refund(b, "W-cap-b", "O-1002", 40000, http.StatusAccepted)
	if s.Approval == nil {
		t.Fatalf("$400 through B: %+v, want waiting for approval", s)
	}
	c.call(t, lead, http.MethodPost, "/v1/approvals/"+s.Approval.ID+"/approve", `{}`, http.StatusOK, nil)
	var wf struct{ Steps []step }
	b.call(t, rep, http.MethodPost, "/v1/workflows/W-cap-b/resume", "", http.StatusOK, &wf)
	if len(wf.Steps) != 1 || wf.Steps[0].Status != "done" {
		t.Fatalf("$400 resumed through B: %+v, want done", wf.Steps)
	}
	for i, p := range []*proc{a, b, c} {
		s := refund(p, fmt.Sprintf("W-cap-over-%d", i), "O-1002", 6000, http.StatusForbidden)
		if s.Status != "denied" || s.Rule != "R5-rep-daily-cap" {
			t.Errorf("$60 past the $500 cap ($449 spent) through %s: %+v, want denied under R5", p.ep.Sidecar, s)
		}
	}
	if n := len(a.ledgerEntries(t, "O-1002")); n != 1 {
		t.Errorf("%d refund entries on O-1002, want 1 (the approved $400)", n)
	}
}

// tightCap is the .tar.gz of p1 with the rep's daily cap lowered to
// cents, declared in its manifest (a tightening: no second operator).
func tightCap(t *testing.T, cents int64) []byte {
	t.Helper()
	src, err := bundles.Open("p1")
	if err != nil {
		t.Fatal(err)
	}
	m := fstest.MapFS{}
	err = fs.WalkDir(src, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(src, path)
		m[path] = &fstest.MapFile{Data: b}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var data map[string]map[string]map[string]any
	if err := json.Unmarshal(m["data.json"].Data, &data); err != nil {
		t.Fatal(err)
	}
	from := data["countersign"]["limits"]["rep_daily"]
	data["countersign"]["limits"]["rep_daily"] = cents
	var manifest map[string]any
	if err := json.Unmarshal(m[".manifest"].Data, &manifest); err != nil {
		t.Fatal(err)
	}
	manifest["revision"] = "p1-tight-cap"
	manifest["metadata"] = map[string]any{"limit_changes": []map[string]any{{"name": "rep_daily", "from": from, "to": cents}}}
	for name, v := range map[string]any{"data.json": data, ".manifest": manifest} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		m[name] = &fstest.MapFile{Data: b}
	}
	archive, err := policy.Build(m)
	if err != nil {
		t.Fatal(err)
	}
	return archive
}
