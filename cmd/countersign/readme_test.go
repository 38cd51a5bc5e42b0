package main_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The README marks its newcomer walk-through with HTML comments: the
// fenced block after readmeServe starts the sidecar, those after
// readmeNewcomer are run in order, in one shell, against it.
const (
	readmeServe    = "<!-- newcomer: serve -->"
	readmeNewcomer = "<!-- newcomer -->"
	// readmeData is the walk-through's data directory, replaced by the
	// test's own.
	readmeData = "/tmp/countersign"
)

// fence is one fenced code block of the README.
type fence struct {
	lang string
	mark string // the HTML comment on the line before its opening, if any
	body string
	line int // of its opening
}

// readmeFences returns the README's fenced blocks in order.
func readmeFences(t *testing.T) []fence {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var out []fence
	var cur *fence
	var prev string
	lines := strings.Split(string(b), "\n")
	for i, l := range lines {
		switch {
		case cur == nil && strings.HasPrefix(strings.TrimSpace(l), "```"):
			cur = &fence{lang: strings.TrimPrefix(strings.TrimSpace(l), "```"), line: i + 1}
			if strings.HasPrefix(prev, "<!--") {
				cur.mark = prev
			}
		case cur != nil && strings.TrimSpace(l) == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.body += strings.TrimPrefix(l, "   ") + "\n" // a block inside a list item is indented
		}
		if strings.TrimSpace(l) != "" {
			prev = strings.TrimSpace(l)
		}
	}
	return out
}

// TestReadmeExamples holds every shell example of the README to what a
// newcomer copying it needs: a curl that sends JSON says so in its
// Content-Type (the API refuses it otherwise), no example time is in the
// past, and no bare countersign is run before the README says how to get
// the binary.
func TestReadmeExamples(t *testing.T) {
	var installed bool
	now := time.Now()
	timestamp := regexp.MustCompile(`20\d\d-\d\d-\d\dT[0-9:.]+Z`)
	exp := regexp.MustCompile(`"exp": *(\d+)`)
	for _, f := range readmeFences(t) {
		for _, ts := range timestamp.FindAllString(f.body, -1) {
			if at, err := time.Parse(time.RFC3339, ts); err == nil && at.Before(now) {
				t.Errorf("README line %d: the example time %s is in the past: compute it with date, or leave it out", f.line, ts)
			}
		}
		for _, m := range exp.FindAllStringSubmatch(f.body, -1) {
			if n, _ := strconv.ParseInt(m[1], 10, 64); time.Unix(n, 0).Before(now) {
				t.Errorf("README line %d: the example token's exp %s is in the past", f.line, m[1])
			}
		}
		if f.lang != "sh" && f.lang != "" {
			continue
		}
		if strings.Contains(f.body, "go install ./cmd/countersign") || strings.Contains(f.body, "go build -o") {
			installed = true
		}
		for _, l := range strings.Split(f.body, "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), "countersign ") && !installed {
				t.Errorf("README line %d runs %q before any block says how to get the binary (go install ./cmd/countersign)", f.line, strings.TrimSpace(l))
			}
		}
		for _, c := range curlCommands(f.body) {
			if dataFlag.MatchString(c.bare) && !saysJSON(c.text, f.body) {
				t.Errorf("README line %d: a curl that sends a body without Content-Type: application/json:\n%s", f.line, c.text)
			}
		}
	}
}

// curlCommand is one curl command of a shell block: its text, and bare,
// the same with what is quoted or in a command substitution blanked, so
// that the flags it has are the flags curl gets.
type curlCommand struct{ text, bare string }

// curlCommands returns each curl command of a shell block, from "curl" to
// the end of the command: a newline outside quotes and not escaped, or a
// |, ; or ) outside quotes and command substitutions.
func curlCommands(block string) []curlCommand {
	var out []curlCommand
	for i := 0; ; {
		j := strings.Index(block[i:], "curl ")
		if j < 0 {
			return out
		}
		start := i + j
		end, quote, depth := start, byte(0), 0
		var bare strings.Builder
	scan:
		for ; end < len(block); end++ {
			c, hidden := block[end], quote != 0 || depth > 0
			switch {
			case quote != 0:
				if c == quote {
					quote = 0
				}
			case c == '\'' || c == '"':
				quote, hidden = c, true
			case c == '$' && end+1 < len(block) && block[end+1] == '(':
				depth++
				bare.WriteByte(' ')
				end++
			case c == ')' && depth > 0:
				depth--
			case c == '\n' && block[end-1] != '\\', c == '|' || c == ';' || c == ')':
				break scan
			}
			if hidden {
				c = ' '
			}
			bare.WriteByte(c)
		}
		out = append(out, curlCommand{text: block[start:end], bare: bare.String()})
		i = end
	}
}

// dataFlag is a curl flag that sends a body.
var dataFlag = regexp.MustCompile(`\s(-d|--data|--data-raw|--data-binary|--json)\s`)

// saysJSON reports whether cmd sends Content-Type: application/json, in its
// own words or through an array of arguments that block builds with it.
func saysJSON(cmd, block string) bool {
	const ct = "Content-Type: application/json"
	if strings.Contains(cmd, ct) || strings.Contains(cmd, "--json ") {
		return true
	}
	for _, m := range regexp.MustCompile(`"\$\{(\w+)\[@\]\}"`).FindAllStringSubmatch(cmd, -1) {
		for _, l := range strings.Split(block, "\n") {
			if (strings.HasPrefix(l, m[1]+"=(") || strings.HasPrefix(l, m[1]+"+=(")) && strings.Contains(l, ct) {
				return true
			}
		}
	}
	return false
}

// TestReadmeNewcomerPath runs the README's walk-through as a newcomer
// would on a fresh machine: the binary built from this tree first on PATH
// as countersign, the serve command as the README writes it, then the
// marked blocks in order in one bash, with set -euo pipefail. The refund
// that needs a lead must end done, approved by the lead the README names
// and used, and Ctrl-C (SIGINT) must stop the sidecar with status 0.
func TestReadmeNewcomerPath(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts a stack")
	}
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is missing: bash .ci/run installs it", tool)
		}
	}
	var serve string
	var blocks []string
	for _, f := range readmeFences(t) {
		switch f.mark {
		case readmeServe:
			serve = strings.TrimSpace(f.body)
		case readmeNewcomer:
			blocks = append(blocks, f.body)
		}
	}
	if len(blocks) == 0 || serve == "" {
		t.Fatalf("the README marks no walk-through: a block after %s to start the sidecar and blocks after %s to run", readmeServe, readmeNewcomer)
	}
	for _, want := range []string{"/approve", "/resume", "Content-Type: application/json"} {
		if !strings.Contains(strings.Join(blocks, ""), want) {
			t.Errorf("the walk-through never says %q", want)
		}
	}

	bin := buildServeBinary(t)
	dir := filepath.Join(t.TempDir(), "countersign")
	args := strings.Fields(strings.ReplaceAll(serve, readmeData, dir))
	if strings.Contains(serve, "\n") || len(args) < 2 || args[0] != "countersign" || args[1] != "serve" || !strings.Contains(serve, "--dev") {
		t.Fatalf("the serve block is not one countersign serve --dev command:\n%s", serve)
	}
	s := startCommand(t, exec.Command(bin, args[1:]...), dir, &syncBuffer{})

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	script := "set -euo pipefail\n" + strings.ReplaceAll(strings.Join(blocks, ""), readmeData, dir)
	sh := exec.CommandContext(ctx, "bash", "-c", script)
	sh.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := sh.CombinedOutput()
	t.Logf("the walk-through printed:\n%s", out)
	if err != nil {
		t.Fatalf("the walk-through failed: %v", err)
	}

	wantRefundApproved(t, dir, "lead-dee")

	if err := s.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-s.done:
		if err != nil {
			t.Fatalf("Ctrl-C (SIGINT) ended the sidecar with %v, want status 0", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the sidecar still runs 30s after Ctrl-C (SIGINT)")
	}
}

// wantRefundApproved checks, as an operator through the API, that the
// stack over dir holds one workflow whose one step is a refund done with
// an approval that lead used.
func wantRefundApproved(t *testing.T, dir, lead string) {
	t.Helper()
	var ep struct{ Sidecar string }
	var tokens map[string]string
	readJSON(t, filepath.Join(dir, "dev-endpoints.json"), &ep)
	readJSON(t, filepath.Join(dir, "dev-tokens.json"), &tokens)
	get := func(path, who string, v any) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, ep.Sidecar+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tokens[who])
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: status %d", path, res.StatusCode)
		}
		if err := json.NewDecoder(res.Body).Decode(v); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
	}
	var list struct {
		Workflows []struct{ ID string } `json:"workflows"`
	}
	get("/v1/workflows", "ops-ida", &list)
	if len(list.Workflows) != 1 {
		t.Fatalf("%d workflows after the walk-through, want 1", len(list.Workflows))
	}
	var approvals struct {
		Approvals []struct {
			Approver, Status string
		} `json:"approvals"`
	}
	get("/v1/approvals?status=used", lead, &approvals)
	var wf struct {
		Steps []struct {
			Tool, Status string
		} `json:"steps"`
	}
	get("/v1/workflows/"+list.Workflows[0].ID, "ops-ida", &wf)
	if len(wf.Steps) != 1 || wf.Steps[0].Tool != "issue_refund" || wf.Steps[0].Status != "done" {
		t.Errorf("the walk-through's workflow has steps %+v, want one issue_refund done", wf.Steps)
	}
	if len(approvals.Approvals) != 1 || approvals.Approvals[0].Approver != lead {
		t.Errorf("used approvals %+v, want one by %s", approvals.Approvals, lead)
	}
}
