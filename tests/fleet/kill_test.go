package fleet_test

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/tool"
)

const (
	killAgents = 24
	// killAfter is how many 200 done answers the agents collect before B
	// is killed: counted, not timed.
	killAfter = 60
	killOrder = "O-1002"
)

// TestKillOneOfThreeUnderLoad: agents refund a cent each in their own
// workflows through three sidecars; B is killed with SIGKILL under that
// load. Once its leases expire, A and C take its workflows over: every
// step acknowledged done has exactly one ledger entry, no workflow is paid
// twice, every ledger entry's step is done, reconciliation finds nothing
// unexplained and the audit chain verifies. B is the one killed because A
// hosts the simulators.
func TestKillOneOfThreeUnderLoad(t *testing.T) {
	f := newFleet(t, 3)
	a, b := f.procs[0], f.procs[1]
	rep, ops := f.tokens["rep-ana"], f.tokens["ops-ida"]
	var (
		mu    sync.Mutex
		tried []string
		acked []string
		dones atomic.Int64
		wg    sync.WaitGroup
		once  sync.Once
	)
	killed := make(chan struct{})
	kill := func() { once.Do(func() { _ = b.cmd.Process.Kill(); close(killed) }) }
	for i := range killAgents {
		p := f.procs[i%len(f.procs)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; ; k++ {
				select {
				case <-killed:
					return
				default:
				}
				wf := fmt.Sprintf("W-kill-%d-%d", i, k)
				if status, _ := p.do(rep, http.MethodPost, "/v1/workflows", `{"id":"`+wf+`","ticket":"T-kill"}`, nil); status != http.StatusCreated {
					return
				}
				mu.Lock()
				tried = append(tried, wf)
				mu.Unlock()
				var s step
				status, _ := p.do(rep, http.MethodPost, "/v1/workflows/"+wf+"/steps",
					`{"tool":"issue_refund","args":{"order":"`+killOrder+`","amount":1}}`, &s)
				if status == 0 {
					return
				}
				if status == http.StatusOK && s.Status == "done" {
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
	kill()
	b.wantKilled(t)

	// Every workflow settles: A and C take B's over once its leases expire.
	open := func() []string {
		var out []string
		for _, wf := range tried {
			var got struct{ Steps []step }
			if status, _ := a.do(rep, http.MethodGet, "/v1/workflows/"+wf, "", &got); status != http.StatusOK {
				out = append(out, wf)
				continue
			}
			for _, s := range got.Steps {
				if s.Status == "started" || s.Status == "unknown" || s.Status == "pending" {
					out = append(out, wf)
				}
			}
		}
		return out
	}
	a.until(t, "every workflow settled", func() bool { return len(open()) == 0 })

	keys := map[string]string{}
	for _, wf := range tried {
		keys["cs-"+engine.Binding(wf, tool.IssueRefund, tool.Args{Order: killOrder, Amount: 1})[:40]] = wf
	}
	entries := map[string]int{}
	for _, e := range a.ledgerEntries(t, killOrder) {
		wf, ok := keys[e.Key]
		if !ok {
			t.Errorf("ledger entry %s (key %s) belongs to no workflow the agents created", e.ID, e.Key)
			continue
		}
		entries[wf]++
	}
	for _, wf := range acked {
		if entries[wf] != 1 {
			t.Errorf("%s answered 200 done and has %d ledger entries, want 1", wf, entries[wf])
		}
	}
	for wf, n := range entries {
		var got struct{ Steps []step }
		a.call(t, rep, http.MethodGet, "/v1/workflows/"+wf, "", http.StatusOK, &got)
		if n != 1 || len(got.Steps) != 1 || got.Steps[0].Status != "done" {
			t.Errorf("%s: %d ledger entries, steps %+v; want 1 entry and its step done", wf, n, got.Steps)
		}
	}
	var rec struct{ Unexplained *int }
	a.call(t, ops, http.MethodPost, "/v1/reconciliations", "", http.StatusOK, &rec)
	if rec.Unexplained == nil || *rec.Unexplained != 0 {
		t.Errorf("reconciliation: unexplained %v, want 0", rec.Unexplained)
	}
	a.verifyAudit(t, ops)
	t.Logf("%d agents over 3 sidecars, %d workflows, %d acknowledged done before B was killed, %d paid",
		killAgents, len(tried), len(acked), len(entries))
}
