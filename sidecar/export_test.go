package sidecar_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/countersign/countersign/cmd/devstack"
	"github.com/countersign/countersign/executor/credential"
	"github.com/countersign/countersign/executor/pgtest"
)

// exported is one line of a streamed export, kept as it came and decoded.
type exported struct {
	raw    string
	fields map[string]any
}

// ndjson streams path as who and returns its lines, after checking what
// every streamed answer promises: 200, application/x-ndjson, no
// Content-Length (it is sent as it is read), one JSON object a line.
func (e *env) ndjson(t *testing.T, path, who string) []exported {
	t.Helper()
	r := e.call(t, http.MethodGet, path, who, nil)
	r.want(t, http.StatusOK, "")
	if ct := r.header.Get("Content-Type"); ct != "application/x-ndjson" {
		t.Fatalf("%s: Content-Type %q, want application/x-ndjson", path, ct)
	}
	if cl := r.header.Get("Content-Length"); cl != "" {
		t.Errorf("%s: Content-Length %s: the export was buffered whole, not streamed", path, cl)
	}
	var out []exported
	sc := bufio.NewScanner(bytes.NewReader(r.body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var f map[string]any
		if err := json.Unmarshal(sc.Bytes(), &f); err != nil {
			t.Fatalf("%s: line %d is not a JSON object: %s", path, len(out)+1, sc.Bytes())
		}
		out = append(out, exported{raw: sc.Text(), fields: f})
	}
	return out
}

// pagedAudit reads the whole audit log through the JSON pages.
func (e *env) pagedAudit(t *testing.T) []string {
	t.Helper()
	var out []string
	after := ""
	for {
		var p struct {
			Records []json.RawMessage `json:"records"`
			Next    string            `json:"next"`
		}
		e.call(t, http.MethodGet, "/v1/audit?limit=3&after="+after, "ops-ida", nil).decode(t, &p)
		for _, r := range p.Records {
			var c bytes.Buffer
			if err := json.Compact(&c, r); err != nil {
				t.Fatal(err)
			}
			out = append(out, c.String())
		}
		if p.Next == "" {
			return out
		}
		after = p.Next
	}
}

// sequenced waits until a fleet's sequencer has chained every audit
// record written so far (at once on bbolt, where there is none).
func (e *env) sequenced(t *testing.T) {
	t.Helper()
	for range 600 {
		var v struct {
			OK          bool `json:"ok"`
			Unsequenced int  `json:"unsequenced"`
		}
		e.call(t, http.MethodGet, "/v1/audit/verify", "ops-ida", nil).decode(t, &v)
		if !v.OK {
			t.Fatalf("audit chain broken: %+v", v)
		}
		if v.Unsequenced == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond) // polling for the sequencer, not timing it
	}
	t.Fatal("the fleet's audit records were never all sequenced")
}

// backends runs test on bbolt, and on PostgreSQL when its binaries exist.
func backends(t *testing.T, test func(t *testing.T, o devstack.Options)) {
	for _, backend := range []string{"bbolt", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			o := devstack.Options{}
			if backend == "postgres" {
				kek, err := credential.NewKeyEncryptionKey()
				if err != nil {
					t.Fatal(err)
				}
				o.StoreURL, o.KeyEncryptionKey = pgtest.URL(t), kek
			}
			test(t, o)
		})
	}
}

// threeRefunds makes rep-ana's W1 (allowed) and W3 (waiting for a lead),
// and rep-ben's W2 (allowed).
func threeRefunds(t *testing.T, e *env) {
	t.Helper()
	e.open(t, "rep-ana", "W1")
	e.open(t, "rep-ben", "W2")
	e.open(t, "rep-ana", "W3")
	e.propose(t, "rep-ana", "W1", "issue_refund", refund("O-1001", 3000))
	e.propose(t, "rep-ben", "W2", "issue_refund", refund("O-1003", 2000))
	r, _ := e.propose(t, "rep-ana", "W3", "issue_refund", refund("O-1002", 12000))
	r.want(t, http.StatusAccepted, "")
}

// The audit streams, while the sidecar runs, as the same records the
// pages show, in chain order; from, since, until, workflow, rep and rule
// select from it; on either store.
func TestAuditStreamsAsNDJSON(t *testing.T) {
	backends(t, func(t *testing.T, o devstack.Options) {
		e := start(t, o)
		threeRefunds(t, e)
		e.sequenced(t)

		all := e.ndjson(t, "/v1/audit?format=ndjson", "ops-ida")
		paged := e.pagedAudit(t)
		if len(all) != len(paged) || len(all) < 6 {
			t.Fatalf("streamed %d records, the pages %d", len(all), len(paged))
		}
		for i := range all {
			if all[i].raw != paged[i] {
				t.Fatalf("record %d streamed as\n%s\npaged as\n%s", i, all[i].raw, paged[i])
			}
			if i > 0 && all[i].fields["prev"] != all[i-1].fields["hash"] {
				t.Fatalf("record %d: prev is not record %d's hash", i, i-1)
			}
		}

		from := e.ndjson(t, "/v1/audit?format=ndjson&from=2", "ops-ida")
		if len(from) != len(all)-2 || from[0].raw != all[2].raw {
			t.Errorf("from=2: %d records starting %s, want the chain from position 2", len(from), from[0].raw)
		}
		mid, _ := time.Parse(time.RFC3339Nano, all[len(all)/2].fields["at"].(string))
		cut := mid.Truncate(time.Second).Add(time.Second).Format(time.RFC3339)
		since := e.ndjson(t, "/v1/audit?format=ndjson&since="+url.QueryEscape(cut), "ops-ida")
		until := e.ndjson(t, "/v1/audit?format=ndjson&until="+url.QueryEscape(cut), "ops-ida")
		if len(since)+len(until) != len(all) {
			t.Errorf("since %s: %d, until: %d; together %d, want all %d", cut, len(since), len(until), len(since)+len(until), len(all))
		}

		count := func(keep func(map[string]any) bool) int {
			n := 0
			for _, r := range all {
				if keep(r.fields) {
					n++
				}
			}
			return n
		}
		for _, c := range []struct {
			query string
			keep  func(map[string]any) bool
		}{
			{"workflow=W2", func(r map[string]any) bool { return r["workflow"] == "W2" }},
			{"rep=rep-ana", func(r map[string]any) bool { return r["workflow"] == "W1" || r["workflow"] == "W3" }},
			{"rule=" + ruleOf(t, all, "W3"), func(r map[string]any) bool {
				d, _ := r["detail"].(map[string]any)
				return r["kind"] == "decision" && d["rule"] == ruleOf(t, all, "W3")
			}},
		} {
			got := e.ndjson(t, "/v1/audit?format=ndjson&"+c.query, "ops-ida")
			if want := count(c.keep); len(got) != want || want == 0 {
				t.Errorf("%s: %d records, want %d", c.query, len(got), want)
			}
			for _, r := range got {
				if !c.keep(r.fields) {
					t.Errorf("%s: kept %s", c.query, r.raw)
				}
			}
		}
	})
}

// ruleOf is the rule of workflow wf's decision record.
func ruleOf(t *testing.T, records []exported, wf string) string {
	t.Helper()
	for _, r := range records {
		if r.fields["kind"] == "decision" && r.fields["workflow"] == wf {
			d, _ := r.fields["detail"].(map[string]any)
			return fmt.Sprint(d["rule"])
		}
	}
	t.Fatalf("no decision record for %s", wf)
	return ""
}

// The decision log streams in OPA's shape, as the pages show it, from a
// seq, by rep and by rule, on either store.
func TestDecisionsStreamAsNDJSON(t *testing.T) {
	backends(t, func(t *testing.T, o devstack.Options) {
		e := start(t, o)
		threeRefunds(t, e)
		var page struct {
			Decisions []json.RawMessage `json:"decisions"`
		}
		e.call(t, http.MethodGet, "/v1/decisions", "lead-dee", nil).decode(t, &page)
		all := e.ndjson(t, "/v1/decisions?format=ndjson", "lead-dee")
		if len(all) != 3 || len(page.Decisions) != 3 {
			t.Fatalf("streamed %d decisions, paged %d; want 3", len(all), len(page.Decisions))
		}
		for i := range all {
			var c bytes.Buffer
			json.Compact(&c, page.Decisions[i])
			if all[i].raw != c.String() {
				t.Errorf("decision %d streamed as\n%s\npaged as\n%s", i, all[i].raw, c.String())
			}
			if all[i].fields["decision_id"] == "" || all[i].fields["input"] == nil {
				t.Errorf("decision %d without OPA's fields: %s", i, all[i].raw)
			}
		}
		seq2 := fmt.Sprint(all[1].fields["seq"])
		for query, want := range map[string][]int{
			"from=" + seq2: {1, 2},
			"rep=rep-ben":  {1},
			"rule=" + fmt.Sprint(all[2].fields["rule"]): {2},
			"workflow=W1": {0},
		} {
			got := e.ndjson(t, "/v1/decisions?format=ndjson&"+query, "ops-ida")
			if len(got) != len(want) {
				t.Errorf("%s: %d decisions, want %d", query, len(got), len(want))
				continue
			}
			for i, w := range want {
				if got[i].raw != all[w].raw {
					t.Errorf("%s: line %d is %s, want %s", query, i, got[i].raw, all[w].raw)
				}
			}
		}
	})
}

// An export that spans several of the store's pages (1,000 records) is
// whole and in order.
func TestAuditStreamSpansPages(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 1,010 records")
	}
	e := start(t, devstack.Options{})
	for i := range 1010 {
		e.call(t, http.MethodPut, "/v1/switches/reship_order", "ops-ida", map[string]any{"enabled": i%2 == 1}).want(t, http.StatusOK, "")
	}
	all := e.ndjson(t, "/v1/audit?format=ndjson", "ops-ida")
	if len(all) < 1010 {
		t.Fatalf("%d records, want at least 1010", len(all))
	}
	for i := 1; i < len(all); i++ {
		if all[i].fields["prev"] != all[i-1].fields["hash"] {
			t.Fatalf("record %d: prev is not record %d's hash (a page boundary lost or repeated one)", i, i-1)
		}
	}
	tail := e.ndjson(t, "/v1/audit?format=ndjson&from=1005", "ops-ida")
	if len(tail) != len(all)-1005 || tail[0].raw != all[1005].raw {
		t.Errorf("from=1005: %d records, want %d from position 1005", len(tail), len(all)-1005)
	}
}

// Bad parameters are 400 invalid_query, naming the parameter; the roles
// are those of the JSON endpoints.
func TestExportRefusals(t *testing.T) {
	e := start(t, devstack.Options{})
	for _, c := range []struct {
		path, who string
		status    int
		code      string
	}{
		{"/v1/audit?format=xml", "ops-ida", 400, "invalid_query"},
		{"/v1/audit?format=ndjson&from=-1", "ops-ida", 400, "invalid_query"},
		{"/v1/audit?format=ndjson&since=yesterday", "ops-ida", 400, "invalid_query"},
		{"/v1/audit?format=ndjson&until=2026-13-01T00:00:00Z", "ops-ida", 400, "invalid_query"},
		{"/v1/audit?format=ndjson&rep=%20", "ops-ida", 400, "invalid_query"},
		{"/v1/audit?format=ndjson&after=nope", "ops-ida", 400, "invalid_query"},
		{"/v1/audit?format=ndjson&from=3&after=01JDQ4ZK7M0000000000000000", "ops-ida", 400, "invalid_query"},
		{"/v1/audit?format=ndjson&limit=5", "ops-ida", 400, "invalid_query"},
		{"/v1/audit?workflow=W1", "ops-ida", 400, "invalid_query"},
		{"/v1/audit?format=ndjson", "lead-dee", 403, "forbidden_role"},
		{"/v1/audit?format=ndjson", "rep-ana", 403, "forbidden_role"},
		{"/v1/audit?format=ndjson", "", 401, ""},
		{"/v1/decisions?format=ndjson&from=0", "ops-ida", 400, "invalid_query"},
		{"/v1/decisions?format=ndjson&cursor=AAAAAAAAAAE&from=2", "ops-ida", 400, "invalid_query"},
		{"/v1/decisions?format=ndjson&since=soon", "ops-ida", 400, "invalid_query"},
		{"/v1/decisions?rule=R1", "ops-ida", 400, "invalid_query"},
		{"/v1/decisions?format=csv", "ops-ida", 400, "invalid_query"},
		{"/v1/decisions?format=ndjson", "rep-ana", 403, "forbidden_role"},
	} {
		t.Run(c.path+" as "+c.who, func(t *testing.T) {
			e.call(t, http.MethodGet, c.path, c.who, nil).want(t, c.status, c.code)
		})
	}
}
