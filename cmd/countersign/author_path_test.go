package main_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/tester"

	"github.com/countersign/countersign/cmd/devstack"
	"github.com/countersign/countersign/executor/sim/orders"
)

// TestAuthorsPathWithTheCLI is issue 26's "done when" for policy authors:
// the built countersign, and nothing else, takes a copy of rego/ from
// $50.00 to $75.00 of auto-approval and back, then ships the README's
// 90-day rule, against a dev sidecar with two operators. Refunds go
// through the sidecar's API, as an agent's would.
func TestAuthorsPathWithTheCLI(t *testing.T) {
	bin := buildServeBinary(t)
	st, err := devstack.Start(context.Background(), devstack.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	a := author{t: t, bin: bin, st: st}

	// Under p1 a $60.00 refund waits for a lead.
	var status struct {
		Active struct{ Revision, Digest string }
	}
	a.ok("ops-ida", "bundle", "status", "--json").decode(t, &status)
	if status.Active.Revision != "p1" {
		t.Fatalf("the dev sidecar starts on %+v, want p1", status.Active)
	}
	p1 := status.Active.Digest
	a.refund("W-p1", "O-1001", http.StatusAccepted, "waiting_approval", "R7-refund-needs-approval")

	// 1. The author edits a copy of rego/: the auto limit to $75.00.
	src := filepath.Join(t.TempDir(), "rego")
	if err := os.CopyFS(src, os.DirFS(filepath.Join("..", "..", "rego"))); err != nil {
		t.Fatal(err)
	}
	setAutoLimit(t, src, 5000, 7500)

	// 2. opa test: every test passes at $75.00, and the tests at the auto
	// limit check $75.00, not $50.00: with the rule held at $50.00 while
	// the data says $75.00, those tests fail, and only they.
	if failed, _ := opaTest(t, src); len(failed) > 0 {
		t.Fatalf("opa test at $75.00: %v failed", failed)
	}
	stuck := filepath.Join(t.TempDir(), "rego")
	if err := os.CopyFS(stuck, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	replaceIn(t, filepath.Join(stuck, "call", "call.rego"), "data.countersign.limits.refund_auto - input.args.amount", "5000 - input.args.amount")
	if failed, _ := opaTest(t, stuck); !slices.Equal(failed, []string{
		"test_r4_whole_order_under_auto_limit", "test_r5_day_lands_exactly_on_cap", "test_r6_hour_lands_exactly_on_cap",
		"test_r7_at_auto_limit_allowed", "test_r7_prior_refunds_up_to_auto_limit",
	}) {
		t.Errorf("with the rule at $50.00 and the data at $75.00, opa test failed %v; want the tests at the auto limit", failed)
	}

	// 3. bundle build names the flag it needs, writes nothing, then
	// builds with it.
	pTest := filepath.Join(t.TempDir(), "p-test.tar.gz")
	build := []string{"bundle", "build", "--rego", src, "--revision", "p-test", "-o", pTest}
	r := a.cli("", build...)
	if r.code != 1 || !strings.Contains(r.stderr, "build with --limit-change refund_auto:5000:7500") {
		t.Errorf("build without the flag: exit %d, want 1 naming --limit-change refund_auto:5000:7500\n%s", r.code, r.stderr)
	}
	if _, err := os.Stat(pTest); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused build wrote %s (%v)", pTest, err)
	}
	r = a.ok("", append(build, "--limit-change", "refund_auto:5000:7500")...)
	digest := sha256File(t, pTest)
	r.has(t, "wrote "+pTest+": revision p-test, sha256 "+digest)

	// 4. The dry run: the $60.00 refund that waited would be allowed.
	a.ok("ops-ida", "bundle", "upload", pTest, "--dry-run").has(t,
		"gate PASS: p-test (sha256 "+digest+")", "declared change: refund_auto 5000 → 7500",
		"1 would change ($60.00 in all)",
		"REQUIRE_APPROVAL ALLOW default-allow-after-checks 1 $60.00 W-p1/1 O-1001 $60.00",
		"dry run: nothing was activated or recorded; an upload would wait for a second operator")
	var preview struct {
		Gate   struct{ Digest string }
		Impact struct {
			ChangedAmount int64 `json:"changed_amount"`
		}
	}
	a.ok("ops-ida", "bundle", "upload", pTest, "--dry-run", "--json").decode(t, &preview)
	if preview.Gate.Digest != digest || preview.Impact.ChangedAmount != 6000 {
		t.Errorf("dry run --json: %+v, want the gate of %s and 6000 cents changing", preview, digest)
	}

	// 5. The upload waits for a second operator; the second approves it.
	a.ok("ops-ida", "bundle", "upload", pTest).has(t,
		"p-test (sha256 "+digest+") awaits a second operator",
		"next: an operator other than ops-ida approves it with their own token: countersign bundle approve "+digest)
	a.active("p1", p1)
	a.ok("ops-jon", "bundle", "approve", digest).has(t, "p-test (sha256 "+digest+") is active, by ops-jon, proposed by ops-ida")
	a.active("p-test", digest)

	// 6. A $60.00 refund is paid without a lead.
	a.refund("W-p-test", "O-1002", http.StatusOK, "done", "default-allow-after-checks")

	// 7. Back to p1. rego/ has rules p1 lacks (the workflow bounds), so
	// the rollback is no pure tightening and waits for the second
	// operator too. Then $60.00 waits for a lead again.
	a.ok("ops-ida", "bundle", "activate", p1).has(t, "p1 (sha256 "+p1+") awaits a second operator")
	a.active("p-test", digest)
	a.ok("ops-jon", "bundle", "approve", p1).has(t, "p1 (sha256 "+p1+") is active, by ops-jon, proposed by ops-ida, a rollback")
	a.active("p1", p1)
	a.refund("W-back", "O-1001", http.StatusAccepted, "waiting_approval", "R7-refund-needs-approval")

	// 8. The README's 90-day rule, with its tests, on p1's limits: built,
	// uploaded, approved by the second operator; a refund on an order
	// placed 91 days ago is denied by it.
	setAutoLimit(t, src, 7500, 5000)
	addNinetyDayRule(t, src)
	if failed, ran := opaTest(t, src); len(failed) > 0 || ran["test_r13_"] < 3 {
		t.Fatalf("opa test with the 90-day rule: %v failed, %d of the README's R13 tests ran", failed, ran["test_r13_"])
	}
	p90 := filepath.Join(t.TempDir(), "p-test-90.tar.gz")
	r = a.ok("", "bundle", "build", "--rego", src, "--revision", "p-test-90", "-o", p90)
	d90 := sha256File(t, p90)
	r.has(t, "wrote "+p90+": revision p-test-90, sha256 "+d90)
	a.ok("ops-ida", "bundle", "upload", p90).has(t, "p-test-90 (sha256 "+d90+") awaits a second operator")
	a.ok("ops-jon", "bundle", "approve", d90).has(t, "p-test-90 (sha256 "+d90+") is active, by ops-jon, proposed by ops-ida")
	a.active("p-test-90", d90)
	if _, err := st.Orders.PutOrder(orders.Order{ID: "O-7091", Region: "EU", Customer: "customer-7", Paid: 9000,
		Status: "shipped", PlacedAt: time.Now().UTC().AddDate(0, 0, -91)}); err != nil {
		t.Fatal(err)
	}
	a.refund("W-90", "O-7091", http.StatusForbidden, "denied", ruleR13)
}

// author runs the built countersign against a dev stack's sidecar.
type author struct {
	t   *testing.T
	bin string
	st  *devstack.Stack
}

// ran is one run of the CLI.
type ran struct {
	code           int
	stdout, stderr string
}

// cli runs countersign args, as operator who when who is not "" (the
// sidecar and the token from the environment, as a shell would set them).
func (a author) cli(who string, args ...string) ran {
	a.t.Helper()
	cmd := exec.Command(a.bin, args...)
	cmd.Env = append(os.Environ(), "COUNTERSIGN_SIDECAR=", "COUNTERSIGN_TOKEN=")
	if who != "" {
		cmd.Env = append(cmd.Env, "COUNTERSIGN_SIDECAR="+a.st.Endpoints.Sidecar, "COUNTERSIGN_TOKEN="+a.st.Tokens[who])
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	r := ran{stdout: stdout.String(), stderr: stderr.String()}
	switch {
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	case err != nil:
		a.t.Fatalf("countersign %s: %v", strings.Join(args, " "), err)
	}
	a.t.Logf("countersign %s: exit %d\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr) // shown with -v and on failure
	return r
}

// ok runs countersign args as who and fails the test unless it exits 0.
func (a author) ok(who string, args ...string) ran {
	a.t.Helper()
	r := a.cli(who, args...)
	if r.code != 0 {
		a.t.Fatalf("countersign %s: exit %d, want 0\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r
}

// has fails unless the output holds each of want, white space aside.
func (r ran) has(t *testing.T, want ...string) {
	t.Helper()
	flat := strings.Join(strings.Fields(r.stdout), " ")
	for _, w := range want {
		if !strings.Contains(flat, w) {
			t.Errorf("the output lacks %q:\n%s", w, r.stdout)
		}
	}
}

func (r ran) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
		t.Fatalf("--json printed no JSON: %v\n%s", err, r.stdout)
	}
}

// active fails unless bundle status names revision and digest active.
func (a author) active(revision, digest string) {
	a.t.Helper()
	a.ok("ops-jon", "bundle", "status").has(a.t, "active: "+revision+" (sha256 "+digest+")")
}

// refund proposes a $60.00 refund on order in a new workflow as rep-ana,
// through the sidecar's API, and fails unless it is answered code with
// the step's status and rule.
func (a author) refund(workflow, order string, code int, status, rule string) {
	a.t.Helper()
	if c, body := call(a.t, a.st, "rep-ana", "/v1/workflows", "application/json", []byte(`{"id":"`+workflow+`","ticket":"T-`+workflow+`"}`)); c != http.StatusCreated {
		a.t.Fatalf("workflow %s: %d %s", workflow, c, body)
	}
	c, body := call(a.t, a.st, "rep-ana", "/v1/workflows/"+workflow+"/steps", "application/json",
		[]byte(`{"tool":"issue_refund","args":{"order":"`+order+`","amount":6000}}`))
	var step struct{ Status, Rule string }
	if c != code || json.Unmarshal(body, &step) != nil || step.Status != status || step.Rule != rule {
		a.t.Errorf("$60.00 on %s in %s: %d %s, want %d %s by %s", order, workflow, c, body, code, status, rule)
	}
}

// setAutoLimit edits data.json of the Rego source src, as an author would.
func setAutoLimit(t *testing.T, src string, from, to int) {
	t.Helper()
	replaceIn(t, filepath.Join(src, "data.json"), `"refund_auto": `+strconv.Itoa(from), `"refund_auto": `+strconv.Itoa(to))
}

// replaceIn replaces the one old in the file with new.
func replaceIn(t *testing.T, path, old, new string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), old); n != 1 {
		t.Fatalf("%s holds %q %d times, want once", path, old, n)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(b), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// opaTest runs the Rego tests of dir as `go tool opa test dir` does. It
// returns the names of those that failed, sorted, and counts the tests by
// their name up to its second underscore (test_r13_ ...).
func opaTest(t *testing.T, dir string) ([]string, map[string]int) {
	t.Helper()
	results, err := tester.Run(context.Background(), dir)
	if err != nil {
		t.Fatalf("opa test %s: %v", dir, err)
	}
	var failed []string
	ran := map[string]int{}
	for _, r := range results {
		if !r.Pass() {
			failed = append(failed, r.Name)
		}
		if parts := strings.SplitAfterN(r.Name, "_", 3); len(parts) == 3 {
			ran[parts[0]+parts[1]]++
		}
	}
	slices.Sort(failed)
	return failed, ran
}

func sha256File(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
