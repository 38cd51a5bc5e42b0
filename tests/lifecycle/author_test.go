// Package lifecycle walks a policy author's path end to end, over real
// processes and sockets: edit the Rego, test it with OPA, build a new
// revision with a declared limit change, see its impact, upload it, have a
// second operator approve it, use it, and roll back (which, as it drops a
// rule, a second operator approves too).
package lifecycle

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// newRule is what the author adds: refunds on a cancelled order are
// denied, before the approval threshold, with a Rego test of its own.
const (
	ruleBefore = `} else := require_approval("R7-refund-needs-approval") if {`
	newRule    = `} else := deny("R12-refund-on-cancelled-order") if {
	input.order.status == "cancelled"
` + ruleBefore
	newTest = `

test_refund_on_a_cancelled_order_is_denied if {
	call.decision == {"decision": "DENY", "rule": "R12-refund-on-cancelled-order"} with input as {
		"user": rep_ana, "tool": "issue_refund",
		"args": {"order": "O-9", "amount": 1000},
		"order": {"id": "O-9", "region": "EU", "customer": "c", "paid": 100000, "status": "cancelled"},
		"totals": {"order_refunded": 0, "rep_day": 0, "agent_hour": 0, "order_reships": 0},
	}
		with data.countersign.limits as limits
}
`
)

// p4Data is p3's data with the auto limit at $75.00.
const p4Data = `{"countersign": {"limits": {
	"refund_auto": 7500, "refund_max": 50000, "reship_approval_value": 30000,
	"rep_daily": 100000, "rep_window_seconds": 86400, "agent_hourly": 300000,
	"approval_ttl_seconds": 900, "token_ttl_seconds": 60
}}}`

func TestAuthorsPath(t *testing.T) {
	root := moduleRoot(t)
	bin := filepath.Join(t.TempDir(), "countersign")
	run(t, root, "go", "build", "-o", bin, "./cmd/countersign")

	// 1. Edit a copy of rego/ (the only Rego source) and test it with OPA.
	src := filepath.Join(t.TempDir(), "rego")
	copyDir(t, filepath.Join(root, "rego"), src)
	edit(t, filepath.Join(src, "call", "call.rego"), func(s string) string {
		if !strings.Contains(s, ruleBefore) {
			t.Fatalf("call.rego has no %q to add the rule before", ruleBefore)
		}
		return strings.Replace(s, ruleBefore, newRule, 1)
	})
	edit(t, filepath.Join(src, "call", "call_test.rego"), func(s string) string { return s + newTest })
	t.Logf("go tool opa test:\n%s", run(t, root, "go", "tool", "opa", "test", src))

	// 2. Build p4 with the auto limit raised from $50 to $75, declared.
	work := t.TempDir()
	data := filepath.Join(work, "data.json")
	if err := os.WriteFile(data, []byte(p4Data), 0o600); err != nil {
		t.Fatal(err)
	}
	p4 := filepath.Join(work, "p4.tar.gz")
	run(t, root, bin, "bundle", "build", "--rego", src, "--revision", "p4", "--data", data,
		"--limit-change", "refund_auto:5000:7500", "-o", p4)

	// A sidecar in dev mode, with p3 released after p1, and a $60 refund
	// that waits for approval under it.
	s := serve(t, bin, filepath.Join(work, "data"))
	p3 := readFile(t, bundleFile(t, bin, work, "p3"))
	s.upload(t, "ops-ida", "", p3).want(t, http.StatusCreated)
	s.post(t, "rep-ana", "/v1/workflows", map[string]string{"id": "W-before", "ticket": "T-1"}).want(t, http.StatusCreated)
	s.post(t, "rep-ana", "/v1/workflows/W-before/steps", map[string]any{"tool": "issue_refund", "args": map[string]any{"order": "O-1001", "amount": 6000}}).
		want(t, http.StatusAccepted)

	// 3. The dry run shows the decision that would flip.
	var dry struct {
		Gate struct {
			Cases []struct{ Amount int64 } `json:"cases"`
		} `json:"gate"`
		Impact struct {
			Replayed int `json:"replayed"`
			Changed  []struct {
				From, To string
				Count    int
			} `json:"changed"`
		} `json:"impact"`
	}
	s.upload(t, "ops-ida", "?dry_run=true", readFile(t, p4)).want(t, http.StatusOK).decode(t, &dry)
	if len(dry.Impact.Changed) != 1 || dry.Impact.Changed[0].From != "REQUIRE_APPROVAL" || dry.Impact.Changed[0].To != "ALLOW" || dry.Impact.Changed[0].Count != 1 {
		t.Fatalf("dry run impact %+v, want the $60 refund flipping from REQUIRE_APPROVAL to ALLOW", dry.Impact)
	}
	amounts := map[int64]bool{}
	for _, c := range dry.Gate.Cases {
		amounts[c.Amount] = true
	}
	if !amounts[7400] || !amounts[7500] || !amounts[7600] {
		t.Errorf("the gate's cases lack $74, $75 and $76: %v", amounts)
	}

	// 4. Upload: a loosening waits for a second operator.
	var awaiting struct{ Status, Digest string }
	s.upload(t, "ops-ida", "", readFile(t, p4)).want(t, http.StatusAccepted).decode(t, &awaiting)
	if awaiting.Status != "awaiting_second_operator" || awaiting.Digest != digest(readFile(t, p4)) {
		t.Fatalf("upload answered %+v", awaiting)
	}
	s.post(t, "ops-ida", "/v1/bundles/"+awaiting.Digest+"/approve", nil).want(t, http.StatusForbidden).code(t, "same_operator")
	s.active(t, "p3")
	s.post(t, "ops-jon", "/v1/bundles/"+awaiting.Digest+"/approve", nil).want(t, http.StatusCreated)
	s.active(t, "p4")

	// 5. p4 allows a $60 refund and denies one on a cancelled order.
	s.post(t, "rep-ana", "/v1/workflows", map[string]string{"id": "W-after", "ticket": "T-2"}).want(t, http.StatusCreated)
	var step struct{ Status, Decision, Rule string }
	s.post(t, "rep-ana", "/v1/workflows/W-after/steps", map[string]any{"tool": "issue_refund", "args": map[string]any{"order": "O-1001", "amount": 6000}}).
		want(t, http.StatusOK).decode(t, &step)
	if step.Status != "done" || step.Decision != "ALLOW" {
		t.Errorf("$60 under p4: %+v, want done and ALLOW", step)
	}
	s.sim(t, s.ep.Orders+"/_sim/orders", map[string]any{"id": "O-7001", "region": "EU", "customer": "customer-7", "paid": 9000, "status": "cancelled"})
	s.post(t, "rep-ana", "/v1/workflows/W-after/steps", map[string]any{"tool": "issue_refund", "args": map[string]any{"order": "O-7001", "amount": 1000}}).
		want(t, http.StatusForbidden).decode(t, &step)
	if step.Rule != "R12-refund-on-cancelled-order" {
		t.Errorf("refund on a cancelled order: %+v, want denied by the new rule", step)
	}

	// 6. Roll back to p3: its limits are tighter, but its rules are not
	// p4's (it has no R12, so a refund on a cancelled order would no
	// longer be denied): a second operator approves the rollback.
	s.post(t, "ops-ida", "/v1/bundles/"+digest(p3)+"/activate", nil).want(t, http.StatusAccepted)
	s.active(t, "p4")
	s.post(t, "ops-jon", "/v1/bundles/"+digest(p3)+"/approve", nil).want(t, http.StatusCreated)
	s.active(t, "p3")

	// 7. Every step of the path is in the audit chain, which verifies.
	var verify struct{ OK bool }
	s.get(t, "ops-ida", "/v1/audit/verify").want(t, http.StatusOK).decode(t, &verify)
	if !verify.OK {
		t.Error("the audit chain does not verify")
	}
	var page struct {
		Records []struct {
			Kind   string         `json:"kind"`
			Actor  string         `json:"actor"`
			Detail map[string]any `json:"detail"`
		} `json:"records"`
	}
	s.get(t, "ops-ida", "/v1/audit?limit=1000").want(t, http.StatusOK).decode(t, &page)
	var trail []string
	for _, r := range page.Records {
		if r.Kind != "bundle" {
			continue
		}
		line := fmt.Sprintf("%v %v by %s", r.Detail["revision"], r.Detail["status"], r.Actor)
		if p, ok := r.Detail["proposer"]; ok {
			line += fmt.Sprintf(" proposed by %v", p)
		}
		if r.Detail["rollback"] == true {
			line += " (rollback)"
		}
		if _, ok := r.Detail["impact"]; ok && r.Detail["revision"] == "p4" {
			line += " with impact"
		}
		trail = append(trail, line)
	}
	want := []string{
		"p1 active by dev-mode",
		"p3 active by ops-ida",
		"p4 awaiting_second_operator by ops-ida with impact",
		"p4 active by ops-jon proposed by ops-ida with impact",
		"p3 awaiting_second_operator by ops-ida (rollback)",
		"p3 active by ops-jon proposed by ops-ida (rollback)",
	}
	if strings.Join(trail, "\n") != strings.Join(want, "\n") {
		t.Errorf("bundle records in the audit chain:\n%s\nwant\n%s", strings.Join(trail, "\n"), strings.Join(want, "\n"))
	}
}

// sidecar is one `countersign serve --dev` process.
type sidecar struct {
	ep     struct{ Sidecar, Orders string }
	tokens map[string]string
}

func serve(t *testing.T, bin, dir string) *sidecar {
	t.Helper()
	cmd := exec.Command(bin, "serve", "--dev", "--data", dir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		<-done
		if t.Failed() {
			t.Logf("serve --dev output:\n%s", out.String())
		}
	})
	s := &sidecar{}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("serve --dev not ready after 60 s")
		}
		select {
		case err := <-done:
			t.Fatalf("serve --dev exited: %v\n%s", err, out.String())
		default:
		}
		ep, err1 := os.ReadFile(filepath.Join(dir, "dev-endpoints.json"))
		tok, err2 := os.ReadFile(filepath.Join(dir, "dev-tokens.json"))
		if err1 == nil && err2 == nil && json.Unmarshal(ep, &s.ep) == nil && json.Unmarshal(tok, &s.tokens) == nil && s.ep.Sidecar != "" && s.tokens["ops-jon"] != "" {
			if r, err := http.Get(s.ep.Sidecar + "/readyz"); err == nil && r.StatusCode == http.StatusOK {
				r.Body.Close()
				return s
			}
		}
	}
}

type reply struct {
	status int
	body   []byte
}

func (s *sidecar) do(t *testing.T, who, method, path, ctype string, body io.Reader) reply {
	t.Helper()
	req, err := http.NewRequest(method, s.ep.Sidecar+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+s.tokens[who])
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{resp.StatusCode, b}
}

func (s *sidecar) post(t *testing.T, who, path string, v any) reply {
	t.Helper()
	var body io.Reader
	if v != nil {
		b, _ := json.Marshal(v)
		body = bytes.NewReader(b)
	}
	return s.do(t, who, http.MethodPost, path, "application/json", body)
}

func (s *sidecar) get(t *testing.T, who, path string) reply {
	t.Helper()
	return s.do(t, who, http.MethodGet, path, "", nil)
}

func (s *sidecar) upload(t *testing.T, who, query string, archive []byte) reply {
	t.Helper()
	return s.do(t, who, http.MethodPost, "/v1/bundles"+query, "application/gzip", bytes.NewReader(archive))
}

func (s *sidecar) active(t *testing.T, revision string) {
	t.Helper()
	var b struct{ Revision string }
	s.get(t, "ops-ida", "/v1/bundles/active").want(t, http.StatusOK).decode(t, &b)
	if b.Revision != revision {
		t.Fatalf("active bundle %s, want %s", b.Revision, revision)
	}
}

func (s *sidecar) sim(t *testing.T, url string, v any) {
	t.Helper()
	b, _ := json.Marshal(v)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST %s: %d", url, resp.StatusCode)
	}
}

func (r reply) want(t *testing.T, status int) reply {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	return r
}

func (r reply) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("%v: %s", err, r.body)
	}
}

func (r reply) code(t *testing.T, want string) {
	t.Helper()
	var e struct{ Error struct{ Code string } }
	r.decode(t, &e)
	if e.Error.Code != want {
		t.Fatalf("error code %q, want %q: %s", e.Error.Code, want, r.body)
	}
}

// bundleFile writes an embedded release, as `countersign bundle` knows it,
// to a file under dir.
func bundleFile(t *testing.T, bin, dir, name string) string {
	t.Helper()
	path := filepath.Join(dir, name+".tar.gz")
	if _, err := os.Stat(path); err == nil {
		return path
	}
	run(t, dir, bin, "bundle", "export", name, "-o", path)
	return path
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func edit(t *testing.T, path string, fn func(string) string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(fn(string(readFile(t, path)))), 0o600); err != nil {
		t.Fatal(err)
	}
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// run runs a command in dir and returns its standard output.
func run(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal(errors.New("no go.mod above the test's working directory"))
		}
		dir = parent
	}
}
