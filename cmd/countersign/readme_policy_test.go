package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/tester"

	"github.com/countersign/countersign/cmd/devstack"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/sim/orders"
)

// The README's worked example for policy authors is three marked blocks:
// a link of refund_decision's chain, inserted before R3's; a predicate,
// appended to call.rego; and its tests, appended to call_test.rego.
const (
	readmeRule      = "<!-- policy: 90 days, rule -->"
	readmePredicate = "<!-- policy: 90 days, predicate -->"
	readmeTests     = "<!-- policy: 90 days, tests -->"
	beforeR3        = `} else := deny("R3-refund-over-ceiling") if {`
	ruleR13         = "R13-order-older-than-90-days"
)

// TestReadmeNinetyDayRule: the README's "deny refunds on orders older
// than 90 days", added to a copy of rego/ as it says, passes opa test with
// its own tests among the others, builds with rego/data.json into a bundle
// that passes the gate, and, activated on a dev sidecar by two operators,
// denies a refund on an order placed 91 days before the sidecar's clock
// and allows one on an order placed 89 days before.
func TestReadmeNinetyDayRule(t *testing.T) {
	root := filepath.Join("..", "..")
	src := filepath.Join(t.TempDir(), "rego")
	if err := os.CopyFS(src, os.DirFS(filepath.Join(root, "rego"))); err != nil {
		t.Fatal(err)
	}
	addNinetyDayRule(t, src)

	// opa test, as `go tool opa test rego/` runs it: every test passes, the
	// README's among them.
	results, err := tester.Run(context.Background(), src)
	if err != nil {
		t.Fatalf("opa test: %v", err)
	}
	var ours int
	for _, r := range results {
		if !r.Pass() {
			t.Errorf("opa test: %s.%s failed (%v)", r.Package, r.Name, r.Error)
		}
		if strings.HasPrefix(r.Name, "test_r13_") {
			ours++
		}
	}
	if ours < 3 {
		t.Fatalf("opa test ran %d of the README's R13 tests", ours)
	}

	// The bundle: rego/ with the rule, and the limits in force.
	data, err := os.ReadFile(filepath.Join(root, "rego", "data.json"))
	if err != nil {
		t.Fatal(err)
	}
	fsys, err := policy.Source(os.DirFS(src), data, "p4", nil)
	if err != nil {
		t.Fatal(err)
	}
	archive, err := policy.Build(fsys)
	if err != nil {
		t.Fatal(err)
	}

	st, err := devstack.Start(context.Background(), devstack.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var pending struct{ Status, Digest string }
	if status, body := call(t, st, "ops-ida", "/v1/bundles", "application/gzip", archive); status != http.StatusAccepted ||
		json.Unmarshal(body, &pending) != nil || pending.Status != "awaiting_second_operator" {
		t.Fatalf("upload: %d %s, want 202 awaiting a second operator (a new rule)", status, body)
	}
	if status, body := call(t, st, "ops-jon", "/v1/bundles/"+pending.Digest+"/approve", "", nil); status != http.StatusCreated {
		t.Fatalf("approve: %d %s", status, body)
	}

	now := time.Now().UTC()
	for _, o := range []orders.Order{
		{ID: "O-7091", Region: "EU", Customer: "customer-7", Paid: 9000, Status: "shipped", PlacedAt: now.AddDate(0, 0, -91)},
		{ID: "O-7089", Region: "EU", Customer: "customer-7", Paid: 9000, Status: "shipped", PlacedAt: now.AddDate(0, 0, -89)},
	} {
		if _, err := st.Orders.PutOrder(o); err != nil {
			t.Fatal(err)
		}
	}
	if status, body := call(t, st, "rep-ana", "/v1/workflows", "application/json", []byte(`{"id":"W-90","ticket":"T-90"}`)); status != http.StatusCreated {
		t.Fatalf("workflow: %d %s", status, body)
	}
	for _, tt := range []struct {
		order, status, rule string
		code                int
	}{
		{"O-7091", "denied", ruleR13, http.StatusForbidden},
		{"O-7089", "done", "default-allow-after-checks", http.StatusOK},
	} {
		args := `{"tool":"issue_refund","args":{"order":"` + tt.order + `","amount":1000}}`
		status, body := call(t, st, "rep-ana", "/v1/workflows/W-90/steps", "application/json", []byte(args))
		var step struct{ Status, Rule string }
		if status != tt.code || json.Unmarshal(body, &step) != nil || step.Status != tt.status || step.Rule != tt.rule {
			t.Errorf("$10 refund on %s: %d %s, want %d %s by %s", tt.order, status, body, tt.code, tt.status, tt.rule)
		}
	}
}

// addNinetyDayRule adds the README's worked example to the Rego source
// directory src as the README says: the rule before R3's, the predicate at
// the end of call.rego, the tests at the end of call_test.rego.
func addNinetyDayRule(t *testing.T, src string) {
	t.Helper()
	blocks := map[string]string{}
	for _, f := range readmeFences(t) {
		if f.mark == readmeRule || f.mark == readmePredicate || f.mark == readmeTests {
			blocks[f.mark] = f.body
		}
	}
	if len(blocks) != 3 {
		t.Fatalf("the README has %d of the worked example's 3 marked blocks", len(blocks))
	}
	edit := func(name string, change func(string) string) {
		p := filepath.Join(src, "call", name)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(change(string(b))), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	edit("call.rego", func(s string) string {
		if strings.Count(s, beforeR3) != 1 {
			t.Fatalf("call.rego has no one %q to add the rule before", beforeR3)
		}
		return strings.Replace(s, beforeR3, blocks[readmeRule]+beforeR3, 1) + "\n" + blocks[readmePredicate]
	})
	edit("call_test.rego", func(s string) string { return s + "\n" + blocks[readmeTests] })
}

// call sends one request to the dev sidecar as a fixture person.
func call(t *testing.T, st *devstack.Stack, who, path, contentType string, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, st.Endpoints.Sidecar+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+st.Tokens[who])
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, out
}
