package crash_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/tool"
	"github.com/countersign/countersign/tests/procs"
)

const (
	loadAgents = 64
	// killAfter is how many 200 done answers the agents collect before the
	// sidecar is killed: a few seconds of load, counted, not timed.
	killAfter = 300
	loadOrder = "O-1002"
)

// TestKillUnderLoad SIGKILLs `serve --dev` while 64 agents create
// workflows and refund a cent in each, restarts it over the same data dir
// (its start-up resumes), and checks over HTTP and against the ledger that
// every step acknowledged done has exactly one ledger entry and that no
// ledger entry lacks its step, which is done.
func TestKillUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs it under load")
	}
	bin := procs.Build(t)
	dir := t.TempDir()
	first := start(t, bin, dir, nil, nil)
	var (
		mu    sync.Mutex
		tried []string // every workflow an agent created
		acked []string // every workflow whose step answered 200 done
		dones atomic.Int64
		wg    sync.WaitGroup
	)
	killed := make(chan struct{})
	var once sync.Once
	kill := func() { once.Do(func() { _ = first.cmd.Process.Kill(); close(killed) }) }
	for i := range loadAgents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; ; k++ {
				select {
				case <-killed:
					return
				default:
				}
				wf := fmt.Sprintf("W-load-%d-%d", i, k)
				if status, _ := post(first, "/v1/workflows", `{"id":"`+wf+`","ticket":"T-load"}`); status != http.StatusCreated {
					return // the process is gone (or refused): this agent stops
				}
				mu.Lock()
				tried = append(tried, wf)
				mu.Unlock()
				status, ans := post(first, "/v1/workflows/"+wf+"/steps", `{"tool":"issue_refund","args":{"order":"`+loadOrder+`","amount":1}}`)
				if status == 0 {
					return
				}
				if status == http.StatusOK && ans.Status == "done" {
					mu.Lock()
					acked = append(acked, wf)
					mu.Unlock()
					if dones.Add(1) >= killAfter {
						kill()
					}
				}
			}
		}()
	}
	wg.Wait()
	kill() // every agent stopped on its own: kill anyway
	first.wantKilled(t)
	if len(acked) == 0 {
		t.Fatal("no step was acknowledged done before the kill")
	}

	second := start(t, bin, dir, nil, nil) // start-up resumes the open workflows
	defer second.stop(t)
	keys := map[string]string{} // idempotency key -> workflow
	for _, wf := range tried {
		keys["cs-"+engine.Binding(wf, tool.IssueRefund, tool.Args{Order: loadOrder, Amount: 1})[:40]] = wf
	}
	entries := map[string]int{} // workflow -> its refund entries
	for _, e := range ledgerEntries(t, second) {
		if e.Kind != "refund" || e.Order != loadOrder {
			continue
		}
		wf, ok := keys[e.Key]
		if !ok {
			t.Errorf("ledger entry %s (key %s) belongs to no workflow the agents created", e.ID, e.Key)
			continue
		}
		entries[wf]++
	}
	for _, wf := range acked {
		if entries[wf] != 1 {
			t.Errorf("%s answered 200 done before the kill and has %d ledger entries, want 1", wf, entries[wf])
		}
	}
	for wf, n := range entries {
		var got struct {
			Steps []struct{ Status, Note string }
		}
		second.call(t, http.MethodGet, "/v1/workflows/"+wf, "", http.StatusOK, &got)
		if n != 1 || len(got.Steps) != 1 || got.Steps[0].Status != "done" {
			t.Errorf("%s: %d ledger entries, steps %+v after restart; want 1 entry and its step done", wf, n, got.Steps)
		}
	}
	t.Logf("%d agents, %d workflows created, %d acknowledged done before SIGKILL, %d with a ledger entry after restart",
		loadAgents, len(tried), len(acked), len(entries))
}

// stepAnswer is what the test reads of a step's answer.
type stepAnswer struct{ Status string }

// post sends a request as rep-ana; status 0 means no answer came.
func post(p *proc, path, body string) (int, stepAnswer) {
	var ans stepAnswer
	res, err := p.do(http.MethodPost, path, body)
	if err != nil {
		return 0, ans
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return 0, ans
	}
	_ = json.Unmarshal(b, &ans)
	return res.StatusCode, ans
}

type ledgerEntry struct{ ID, Kind, Order, Key string }

func ledgerEntries(t *testing.T, p *proc) []ledgerEntry {
	t.Helper()
	res, err := p.client.Get(p.ep.Ledger + "/entries")
	if err != nil {
		t.Fatalf("GET /entries: %v", err)
	}
	defer res.Body.Close()
	var body struct{ Entries []ledgerEntry }
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET /entries: %d", res.StatusCode)
	}
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
		t.Fatalf("GET /entries: %v", err)
	}
	return body.Entries
}
