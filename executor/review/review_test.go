package review_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/countersign/countersign/bundles"
	"github.com/countersign/countersign/bundles/loosen"
	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/review"
	"github.com/countersign/countersign/executor/tool"
)

var ctx = context.Background()

// r7Head opens R7 in call.rego, where the tests add conditions of their
// own.
const r7Head = `} else := require_approval("R7-refund-needs-approval") if {
	not within_auto_refund
`

func same(s string) string { return s }

// p1With is release p1 under revision with call.rego through editCall,
// approver.rego through editApprover and files replaced or added. It
// passes the gate, as every edit of the issue did.
func p1With(t testing.TB, revision string, editCall, editApprover func(string) string, extra map[string]string) *policy.Bundle {
	t.Helper()
	b := p1Edited(t, revision, editCall, editApprover, extra)
	if r, err := policy.Check(ctx, b, p1(t).Limits()); err != nil || !r.Passed() {
		t.Fatalf("%s does not pass the gate (%v): %+v %v", revision, err, r.Failures(), r.TestFailures)
	}
	return b
}

// p1Edited is p1With without the gate.
func p1Edited(t testing.TB, revision string, editCall, editApprover func(string) string, extra map[string]string) *policy.Bundle {
	t.Helper()
	fsys, err := bundles.Variant("p1", revision, editCall, extra)
	if err != nil {
		t.Fatal(err)
	}
	a := fsys["approver/approver.rego"]
	a.Data = []byte(editApprover(string(a.Data)))
	b, err := policy.LoadFS(fsys)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func p1(t testing.TB) *policy.Bundle {
	t.Helper()
	fsys, err := bundles.Open("p1")
	if err != nil {
		t.Fatal(err)
	}
	b, err := policy.LoadFS(fsys)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// p1Data is p1's data.json with JSON members added beside the limits, or
// the limits given changed.
func p1Data(t testing.TB, edit func(map[string]any)) string {
	t.Helper()
	fsys, err := bundles.Open("p1")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := fs.ReadFile(fsys, "data.json")
	if err != nil {
		t.Fatal(err)
	}
	var data map[string]any
	if err := json.Unmarshal(raw, &data); err != nil {
		t.Fatal(err)
	}
	edit(data["countersign"].(map[string]any))
	out, err := json.Marshal(data)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// callInput is the part of a call input an example is checked on.
type callInput struct {
	User struct {
		ID string `json:"id"`
	} `json:"user"`
	Tool string `json:"tool"`
	Args struct {
		Order  string      `json:"order"`
		Amount money.Cents `json:"amount"`
	} `json:"args"`
}

type approverInput struct {
	Approver struct {
		ID   string `json:"id"`
		Role string `json:"role"`
	} `json:"approver"`
	Tool string `json:"tool"`
}

// Each edit of issue 20 shows up as new allowances, with examples that
// name what it lets through; a pure tightening and an unchanged bundle
// show none.
func TestNewAllowances(t *testing.T) {
	tests := []struct {
		name      string
		candidate func(t *testing.T) *policy.Bundle
		// check is asked of every example; nil when there must be none.
		check func(t *testing.T, a review.Allowance)
	}{
		{"an allow rule for rep-ana on O-1002 from $450", func(t *testing.T) *policy.Bundle { return p1With(t, "ana", loosen.AllowAnaOnO1002, same, nil) },
			func(t *testing.T, a review.Allowance) {
				var in callInput
				mustDecode(t, a.Input, &in)
				if a.Kind != review.KindCall || in.User.ID != "rep-ana" || in.Args.Order != "O-1002" || in.Args.Amount < 45000 ||
					a.Candidate.Decision != "ALLOW" || a.Active.Decision == "ALLOW" {
					t.Errorf("example %s: %+v → %+v", a.Input, a.Active, a.Candidate)
				}
			}},
		{"R7 spares rep-ben", func(t *testing.T) *policy.Bundle { return p1With(t, "ben", loosen.SpareBen, same, nil) },
			func(t *testing.T, a review.Allowance) {
				var in callInput
				mustDecode(t, a.Input, &in)
				if a.Kind != review.KindCall || in.User.ID != "rep-ben" || a.Active.Rule != "R7-refund-needs-approval" || a.Candidate.Decision != "ALLOW" {
					t.Errorf("example %s: %+v → %+v", a.Input, a.Active, a.Candidate)
				}
			}},
		{"the approver rules accept rep-ana", func(t *testing.T) *policy.Bundle { return p1With(t, "lead-ana", same, loosen.AcceptAna, nil) },
			func(t *testing.T, a review.Allowance) {
				var in approverInput
				mustDecode(t, a.Input, &in)
				if a.Kind != review.KindApprover || in.Approver.ID != "rep-ana" || in.Approver.Role == "lead" ||
					a.Active.Rule != "approver_not_lead" || a.Candidate.Decision != "allowed" {
					t.Errorf("example %s: %+v → %+v", a.Input, a.Active, a.Candidate)
				}
			}},
		{"a rule that reads its reps from data", func(t *testing.T) *policy.Bundle {
			return p1With(t, "vip", func(s string) string {
				return strings.Replace(s, r7Head, r7Head+"\tnot input.user.id in data.countersign.vip\n", 1)
			}, same, map[string]string{"data.json": p1Data(t, func(cs map[string]any) { cs["vip"] = []string{"rep-zed"} })})
		}, func(t *testing.T, a review.Allowance) {
			var in callInput
			mustDecode(t, a.Input, &in)
			if in.User.ID != "rep-zed" || a.Candidate.Decision != "ALLOW" {
				t.Errorf("example %s: %+v → %+v", a.Input, a.Active, a.Candidate)
			}
		}},
		{"a lower auto limit", func(t *testing.T) *policy.Bundle {
			return p1With(t, "lower", same, same, map[string]string{
				"data.json": p1Data(t, func(cs map[string]any) { cs["limits"].(map[string]any)["refund_auto"] = 4000 }),
				".manifest": `{"revision": "lower", "roots": ["countersign"], "rego_version": 1,
					"metadata": {"limit_changes": [{"name": "refund_auto", "from": 5000, "to": 4000}]}}`,
			})
		}, nil},
		{"the rules laid out again", func(t *testing.T) *policy.Bundle {
			return p1With(t, "layout", func(s string) string { return strings.ReplaceAll(s, "\t", "    ") }, same, nil)
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := review.NewAllowances(ctx, p1(t), tt.candidate(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			if a.Incomplete != "" || a.Evaluated == 0 {
				t.Fatalf("evaluated %d: %s", a.Evaluated, a.Incomplete)
			}
			if tt.check == nil {
				if a.Count != 0 {
					t.Errorf("%d new allowances, want none: %+v", a.Count, a.Examples)
				}
				return
			}
			if a.Count == 0 || len(a.Examples) == 0 || len(a.Examples) > review.MaxExamples {
				t.Fatalf("count %d with %d examples, want some (evaluated %d)", a.Count, len(a.Examples), a.Evaluated)
			}
			for _, ex := range a.Examples {
				tt.check(t, ex)
			}
			t.Logf("%d of %d inputs; first %s: %+v → %+v", a.Count, a.Evaluated, a.Examples[0].Input, a.Examples[0].Active, a.Examples[0].Candidate)
		})
	}
}

// A rule keyed to a rep no literal names is met through the logged
// inputs: the review takes recent decisions as inputs too. (rep-zed's
// $60 refund needs a lead under p1, not under the candidate.)
func TestNewAllowancesFromLoggedInputs(t *testing.T) {
	zed := p1With(t, "zed", func(s string) string {
		return strings.Replace(s, r7Head, r7Head+"\tnot regex.match(\"^rep-z\", input.user.id)\n", 1)
	}, same, nil)
	logged := policy.Input{
		User: &policy.User{ID: "rep-zed", Role: "rep", Region: "EU", Scopes: []string{"lookup", "refund", "reship"}, RefundCeiling: 50000},
		Tool: tool.IssueRefund, Args: tool.Args{Order: "O-1001", Amount: 6000},
		Order: &policy.Order{ID: "O-1001", Region: "EU", Customer: "customer-1", Paid: 12000, Status: "shipped"},
	}
	for _, tc := range []struct {
		logged []policy.Input
		want   bool
	}{{nil, false}, {[]policy.Input{logged}, true}} {
		a, err := review.NewAllowances(ctx, p1(t), zed, tc.logged)
		if err != nil {
			t.Fatal(err)
		}
		if found := a.Count > 0; found != tc.want {
			t.Errorf("with %d logged inputs: %d new allowances, want some: %v", len(tc.logged), a.Count, tc.want)
		}
	}
}

// The same bundles and logged inputs give the same review, byte for byte.
func TestReviewIsDeterministic(t *testing.T) {
	candidate := p1With(t, "ana", loosen.AllowAnaOnO1002, same, nil)
	var first []byte
	for range 2 {
		r, err := review.New(ctx, p1(t), candidate, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if first != nil && string(b) != string(first) {
			t.Fatalf("two reviews differ:\n%s\n%s", first, b)
		}
		first = b
	}
	calls, approvals := review.Inputs(p1(t), candidate, nil)
	if len(calls) == 0 || len(calls) > review.MaxCallInputs || len(approvals) == 0 || len(approvals) > review.MaxApproverInputs {
		t.Errorf("%d call and %d approver inputs", len(calls), len(approvals))
	}
}

// New puts the pieces together: why two operators, the diff of the one
// rule, the data diff and the allowances; an unchanged bundle is not
// evaluated at all.
func TestNew(t *testing.T) {
	r, err := review.New(ctx, p1(t), p1With(t, "ben", loosen.SpareBen, same, nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Against.Revision != "p1" || !reflect.DeepEqual(r.SecondOperator, []string{"Rego module /call/call.rego is changed"}) ||
		len(r.Diff) != 1 || r.Diff[0].Path != "/call/call.rego" || !r.Diff[0].PolicyChanged || len(r.DataDiff) != 0 || r.NewAllowances.Count == 0 {
		t.Errorf("review %+v", r)
	}
	if !strings.Contains(r.Diff[0].Unified, "+\tinput.user.id != \"rep-ben\"\n") {
		t.Errorf("diff:\n%s", r.Diff[0].Unified)
	}
	same, err := review.New(ctx, p1(t), p1With(t, "p1-again", same, same, nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	if same.NewAllowances.Skipped == "" || same.NewAllowances.Evaluated != 0 || len(same.Diff) != 0 || len(same.SecondOperator) != 0 {
		t.Errorf("review of p1 again: %+v", same)
	}
	if b, _ := json.Marshal(same); !strings.Contains(string(b), `"second_operator":[]`) || !strings.Contains(string(b), `"diff":[]`) {
		t.Errorf("an empty review shows its empty lists: %s", b)
	}
	if b, _ := json.Marshal(review.Review{}); string(b) != "{}" {
		t.Errorf("no review: %s", b)
	}
}

// Diff writes unified diffs that patch the old file into the new one:
// one rule added, a file added and removed whole, a change in layout only
// (not a change of policy), and random edits checked by applying them.
func TestDiff(t *testing.T) {
	base := p1(t)
	call := moduleText(t, base, "/call/call.rego")
	at := strings.Count(call[:strings.Index(call, r7Head)], "\n") + 1 // R7's line
	d := review.Diff(base, p1With(t, "ben", loosen.SpareBen, same, nil))
	want := fmt.Sprintf("--- a/call/call.rego\n+++ b/call/call.rego\n@@ -%d,6 +%d,7 @@\n", at-1, at-1)
	if len(d) != 1 || !strings.HasPrefix(d[0].Unified, want) || d[0].Change != review.ModuleModified {
		t.Fatalf("diff %+v, want it to start %q", d, want)
	}

	extra := "package countersign.vip\n\nreps := {\"rep-ana\"}\n"
	added := review.Diff(base, p1With(t, "vip", same, same, map[string]string{"call/vip.rego": extra}))
	if len(added) != 1 || added[0].Change != review.ModuleAdded ||
		added[0].Unified != "--- /dev/null\n+++ b/call/vip.rego\n@@ -0,0 +1,3 @@\n+package countersign.vip\n+\n+reps := {\"rep-ana\"}\n" {
		t.Errorf("added: %+v", added)
	}
	removed := review.Diff(p1With(t, "vip", same, same, map[string]string{"call/vip.rego": strings.TrimSuffix(extra, "\n")}), base)
	if len(removed) != 1 || removed[0].Change != review.ModuleRemoved ||
		removed[0].Unified != "--- a/call/vip.rego\n+++ /dev/null\n@@ -1,3 +0,0 @@\n-package countersign.vip\n-\n-reps := {\"rep-ana\"}\n\\ No newline at end of file\n" {
		t.Errorf("removed: %+v", removed)
	}
	layout := review.Diff(base, p1With(t, "layout", func(s string) string { return "# reformatted\n" + s }, same, nil))
	if len(layout) != 1 || layout[0].PolicyChanged {
		t.Errorf("a comment added: %+v, want a diff that is no change of policy", layout)
	}

	rng := rand.New(rand.NewPCG(20, 1))
	lines := strings.SplitAfter(call, "\n")
	for i := range 60 {
		edited := randomEdit(rng, lines)
		b := p1Edited(t, "r"+strconv.Itoa(i), func(string) string { return edited }, same, nil)
		got := review.Diff(base, b)
		if edited == call {
			if len(got) != 0 {
				t.Fatalf("edit %d changes nothing, diff %+v", i, got)
			}
			continue
		}
		if len(got) != 1 {
			t.Fatalf("edit %d: %d diffs", i, len(got))
		}
		if patched := apply(t, call, got[0].Unified); patched != edited {
			t.Fatalf("edit %d: the diff does not patch the old file into the new one\n%s", i, got[0].Unified)
		}
	}
}

// randomEdit deletes comment lines and inserts comments and blank lines
// at random places of a file's lines (the rules still parse).
func randomEdit(rng *rand.Rand, lines []string) string {
	out := append([]string(nil), lines...)
	for range rng.IntN(6) {
		i := rng.IntN(len(out))
		switch rng.IntN(3) {
		case 0:
			if strings.HasPrefix(strings.TrimSpace(out[i]), "#") {
				out = append(out[:i], out[i+1:]...)
			}
		case 1:
			out = append(out[:i], append([]string{"# note " + strconv.Itoa(rng.IntN(9)) + "\n"}, out[i:]...)...)
		default:
			out = append(out[:i], append([]string{"\n"}, out[i:]...)...)
		}
	}
	return strings.Join(out, "")
}

// apply patches old with a unified diff, checking every context and
// removed line and every hunk's counts.
func apply(t *testing.T, old, diff string) string {
	t.Helper()
	src := strings.SplitAfter(old, "\n")
	var out []string
	next := 0 // index in src of the next line not yet copied
	lines := strings.Split(strings.TrimSuffix(diff, "\n"), "\n")[2:]
	for i := 0; i < len(lines); {
		var fs, fc, ts, tc int
		if _, err := fmt.Sscanf(lines[i], "@@ -%d,%d +%d,%d @@", &fs, &fc, &ts, &tc); err != nil {
			t.Fatalf("hunk header %q: %v", lines[i], err)
		}
		i++
		start := fs - 1
		if fc == 0 {
			start = fs
		}
		out = append(out, src[next:start]...)
		next = start
		if tc > 0 && ts-1 != len(out) || tc == 0 && ts != len(out) {
			t.Fatalf("hunk %q starts at %d in the new file, which has %d lines so far", lines[i-1], ts, len(out))
		}
		var from, to int
		for ; i < len(lines) && !strings.HasPrefix(lines[i], "@@"); i++ {
			l := lines[i]
			body := l[1:] + "\n"
			switch l[0] {
			case ' ', '-':
				if src[next] != body {
					t.Fatalf("line %d is %q, the diff says %q", next+1, src[next], body)
				}
				next++
				from++
				if l[0] == ' ' {
					out = append(out, body)
					to++
				}
			case '+':
				out = append(out, body)
				to++
			default:
				t.Fatalf("line %q", l)
			}
		}
		if from != fc || to != tc {
			t.Fatalf("hunk %q holds %d and %d lines", lines[0], from, to)
		}
	}
	return strings.Join(append(out, src[next:]...), "")
}

func moduleText(t *testing.T, b *policy.Bundle, path string) string {
	t.Helper()
	for _, m := range b.Modules() {
		if m.Path == path {
			return m.Text
		}
	}
	t.Fatalf("no module %s", path)
	return ""
}

func mustDecode(t *testing.T, raw json.RawMessage, v any) {
	t.Helper()
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
}

// BenchmarkNewAllowances is the cost of a review's differential
// evaluation of the rep-ana rule against p1: generating the inputs (at
// most MaxCallInputs + MaxApproverInputs) and evaluating each by the
// candidate, and by p1 where the candidate lets it through.
func BenchmarkNewAllowances(b *testing.B) {
	active, candidate := p1(b), p1With(b, "ana", loosen.AllowAnaOnO1002, same, nil)
	var evaluated int
	for b.Loop() {
		a, err := review.NewAllowances(ctx, active, candidate, nil)
		if err != nil || a.Count == 0 || a.Incomplete != "" {
			b.Fatal(a, err)
		}
		evaluated = a.Evaluated
	}
	b.ReportMetric(float64(evaluated), "inputs/op")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*evaluated), "ns/input")
}
