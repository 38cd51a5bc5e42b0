package fleet_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

// pauseTokenTTL and pauseSkew are the sidecars' --dispatch-token-ttl and
// --receiver-clock-skew in these tests: short, so that a step waits
// seconds, not minutes, for the tokens of a paused sidecar to expire. The
// simulators run on this machine's clock and allow no leeway past exp.
const (
	pauseTokenTTL = 2 * time.Second
	pauseSkew     = time.Second
)

// TestAPausedMemberIsFencedOff is issue 20's items 3 and 4 over real
// processes on PostgreSQL. Sidecar B sends an effect while the system of
// record holds the write (delay_writes_ms), and is frozen with SIGSTOP
// past its lease; A, which runs the simulators, takes the workflow over;
// the held request is let go once B's token has expired, and B is
// continued. A reshipment ships once per reference, and the store counts
// the reships the order system made; a refund never pays more than was
// paid. B's late write is refused (409 workflow_taken_over) and it logs
// the takeover. The two run on one fleet, one after the other, to pay for
// starting it once.
func TestAPausedMemberIsFencedOff(t *testing.T) {
	f := prepareFleet(t)
	f.flags = []string{"--dispatch-token-ttl", pauseTokenTTL.String(), "--receiver-clock-skew", pauseSkew.String()}
	a := f.startFirst(t, t.TempDir(), nil)
	b := f.join(t)
	db, err := store.OpenPostgres(context.Background(), f.store, store.PostgresOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	p := &pause{t: t, a: a, b: b, db: db, ops: f.tokens["ops-ida"]}

	t.Run("a reshipment ships once per reference", func(t *testing.T) {
		p.t = t
		rep, wf := f.tokens["rep-ana"], "W-reship"
		b.call(t, rep, http.MethodPost, "/v1/workflows", `{"id":"`+wf+`","ticket":"T-reship"}`, http.StatusCreated, nil)
		late := p.sendAndFreeze(a.ep.Orders, rep, wf, `{"tool":"reship_order","args":{"order":"O-1001"}}`, `{}`)
		p.settle(a.ep.Orders, wf, late)

		ref := "cs-" + engine.Binding(wf, tool.ReshipOrder, tool.Args{Order: "O-1001"})[:40]
		var byRef, all struct {
			Shipments []struct{ ID, Kind, Reference string }
		}
		a.get(t, a.ep.Orders+"/orders/O-1001/shipments?reference="+ref, &byRef)
		a.get(t, a.ep.Orders+"/orders/O-1001/shipments", &all)
		if len(byRef.Shipments) != 1 || len(all.Shipments) != 1 {
			t.Errorf("shipments of O-1001: %+v; want one, under the step's reference %s", all.Shipments, ref)
		}
		var counted int
		db.View(func(tx *store.Tx) error { counted = tx.OrderReships("O-1001"); return nil })
		if counted != len(all.Shipments) {
			t.Errorf("the store counts %d reships of O-1001, the order system made %d", counted, len(all.Shipments))
		}
	})

	t.Run("a refund never pays more than was paid", func(t *testing.T) {
		p.t = t
		rep, wf := f.tokens["rep-ben"], "W-refund"
		b.call(t, rep, http.MethodPost, "/v1/workflows", `{"id":"`+wf+`","ticket":"T-refund"}`, http.StatusCreated, nil)
		a.call(t, rep, http.MethodPost, "/v1/workflows", `{"id":"W-second","ticket":"T-second"}`, http.StatusCreated, nil)
		late := p.sendAndFreeze(a.ep.Ledger, rep, wf, refund50O1003, `{"unavailable":1}`)
		// The survivor's retry met the 503; another $50 refund of the
		// order is proposed before B's held request is let go.
		var faults struct{ Unavailable int }
		if a.get(t, a.ep.Ledger+"/_sim/faults", &faults); faults.Unavailable != 0 {
			t.Fatalf("the survivor's retry never reached the ledger: %+v", faults)
		}
		var second step
		status, err := a.do(rep, http.MethodPost, "/v1/workflows/W-second/steps", refund50O1003, &second)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("the second $50 refund while W-refund keeps its reservation: %d %s %s", status, second.Status, second.Rule)
		p.settle(a.ep.Ledger, wf, late)

		var entries struct {
			Entries []struct {
				Kind, Order string
				Amount      int64
			}
		}
		a.get(t, a.ep.Ledger+"/entries", &entries)
		var refunded int64
		n := 0
		for _, e := range entries.Entries {
			if e.Kind == "refund" && e.Order == "O-1003" {
				refunded, n = refunded+e.Amount, n+1
			}
		}
		if refunded > 8000 {
			t.Errorf("%d cents refunded on O-1003, which was paid 8000", refunded)
		}
		if n != 1 || status != http.StatusForbidden {
			t.Errorf("%d refunds on O-1003 and the second refund answered %d; want 1 (W-refund's, once settled) and the second denied", n, status)
		}
	})
}

// refund50O1003 is a $50 refund on O-1003, whose customer paid $80.
const refund50O1003 = `{"tool":"issue_refund","args":{"order":"O-1003","amount":5000}}`

// pause drives one sidecar, B, into the pause the tests are about; A runs
// the simulators and survives.
type pause struct {
	t    *testing.T
	a, b *proc
	db   *store.DB
	ops  string // an operator's token: any workflow may be read with it
}

// answer is B's answer to the agent's request, once B is continued.
type answer struct {
	status int
	body   json.RawMessage
	err    error
}

// sendAndFreeze has system hold its writes, sends the step body through B
// in workflow wf for token, and, once the system holds B's request, freezes
// B with SIGSTOP and sets the system's faults to after (for the requests
// that come next). It returns once A has taken wf over and let it go again
// (the lease parked, or deleted, under a larger fencing number); the
// channel gets B's answer after settle continues it.
func (p *pause) sendAndFreeze(system, token, wf, body, after string) <-chan answer {
	t := p.t
	t.Helper()
	p.a.put(t, system+"/_sim/faults", `{"delay_writes_ms":60000}`)
	late := make(chan answer, 1)
	go func() {
		var raw json.RawMessage
		status, err := p.b.do(token, http.MethodPost, "/v1/workflows/"+wf+"/steps", body, &raw)
		late <- answer{status, raw, err}
	}()
	p.a.until(t, "B's request held by "+system, func() bool {
		var st struct{ Held int }
		p.a.get(t, system+"/_sim/faults", &st)
		return st.Held == 1
	})
	held := p.lease(wf)
	if err := p.b.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.b.cmd.Process.Signal(syscall.SIGCONT) })
	p.a.put(t, system+"/_sim/faults", after)
	p.a.until(t, "A taking "+wf+" over", func() bool {
		l := p.lease(wf)
		return l.Fence > held.Fence && (l.Parked() || l.Holder == "")
	})
	return late
}

// settle waits until every token B minted for wf's step has expired (so
// that B's held request, let go now, is refused by the system's check of
// exp at commit), lets it go, continues B, and waits for B's answer, a
// 409 workflow_taken_over, and for the step to settle as done through A.
func (p *pause) settle(system, wf string, late <-chan answer) {
	t := p.t
	t.Helper()
	p.a.until(t, "B's tokens for "+wf+" expired", func() bool {
		var s store.Step
		p.db.View(func(tx *store.Tx) (err error) { s, err = tx.Step(wf, 1); return err })
		return time.Now().After(s.TokenDeadline.Add(time.Second))
	})
	p.a.simPost(t, system+"/_sim/faults/release")
	if err := p.b.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	var got answer
	select {
	case got = <-late:
	case <-time.After(readyDeadline):
		t.Fatal("B never answered its held request")
	}
	if got.err != nil || got.status != http.StatusConflict || !strings.Contains(string(got.body), "workflow_taken_over") {
		t.Errorf("B's answer: %d %s %v; want 409 workflow_taken_over", got.status, got.body, got.err)
	}
	p.b.until(t, "B logging the takeover", func() bool {
		return strings.Contains(p.b.out.String(), "another sidecar took this workflow over")
	})
	p.a.until(t, wf+" settled", func() bool {
		var w struct{ Steps []step }
		status, _ := p.a.do(p.ops, http.MethodGet, "/v1/workflows/"+wf+"?wait=2s", "", &w)
		return status == http.StatusOK && len(w.Steps) == 1 && w.Steps[0].Status == "done"
	})
}

// lease is wf's lease as the store holds it (the zero Lease when none).
func (p *pause) lease(wf string) store.Lease {
	var l store.Lease
	err := p.db.View(func(tx *store.Tx) (err error) { l, err = tx.Lease(wf); return err })
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		p.t.Fatal(err)
	}
	return l
}

// get decodes the JSON answer of GET url (a simulator's).
func (p *proc) get(t *testing.T, url string, v any) {
	t.Helper()
	res, err := p.client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if err := json.NewDecoder(res.Body).Decode(v); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, res.StatusCode, err)
	}
}

// put sends PUT url with a JSON body (a simulator's faults).
func (p *proc) put(t *testing.T, url, body string) {
	t.Helper()
	p.send(t, http.MethodPut, url, body)
}

// simPost sends POST url with no body (a simulator's).
func (p *proc) simPost(t *testing.T, url string) {
	t.Helper()
	p.send(t, http.MethodPost, url, "")
}

func (p *proc) send(t *testing.T, method, url, body string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := p.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if b, _ := io.ReadAll(res.Body); res.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %d %s", method, url, res.StatusCode, b)
	}
}
