package fleet_test

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The soak's size: bounded in count, so it stops by itself, and small
// enough for CI's two cores (about a minute).
const (
	soakAgents = 4
	// soakChaos chaos events happen, soakChaosEvery apart, while the
	// agents work; an agent stops when they are over, or after
	// soakMaxOps operations.
	soakChaos      = 8
	soakChaosEvery = 500 * time.Millisecond
	soakMaxOps     = 400
	// soakOrders are generated orders added to the fixture's, so that
	// the caps, not the orders' paid amounts, are what most refunds meet.
	soakOrders = 6
	// soakTimeout bounds each request: a request to a frozen sidecar is
	// abandoned after it and sent again elsewhere, as an agent would.
	soakTimeout = 4 * time.Second
)

// TestSeededSoak drives a fleet of three sidecars on one database with
// random proposals, amendments, resumes, approvals and rejections, while
// a chaos loop kills B (SIGKILL, then restarts it over the same data
// directory), freezes it (SIGSTOP past its leases, then SIGCONT), and
// injects faults in the ledger and the order system (lost responses, 503s,
// writes held for seconds). The sequence of operations comes from the
// seed (COUNTERSIGN_SOAK_SEED, default 4); the interleaving is the
// machine's. Then the faults are cleared, leads decide what waits for
// them, the agents resume, and every step must settle without anyone
// else: none started, unknown, pending or waiting for reconciliation.
// Never more refunded than paid on any order, one shipment per reference,
// reconciliation finds nothing unexplained, and the audit chain verifies.
//
// A runs the simulators and the identity provider, so only B is killed
// or frozen; C is a third member that takes B's work over.
func TestSeededSoak(t *testing.T) {
	// Seed 4 froze B with a reship in flight on the code before the
	// effect fence: the reference shipped twice.
	seed := uint64(4)
	if s := os.Getenv("COUNTERSIGN_SOAK_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("COUNTERSIGN_SOAK_SEED=%q: want an unsigned integer", s)
		}
	}
	t.Logf("seed %d (COUNTERSIGN_SOAK_SEED=%d reproduces the sequence of operations)", seed, seed)

	f := prepareFleet(t)
	f.flags = []string{"--dispatch-token-ttl", pauseTokenTTL.String(), "--receiver-clock-skew", pauseSkew.String()}
	f.startFirst(t, t.TempDir(), nil)
	a := f.first
	bDir := t.TempDir()
	s := &soak{f: f, a: a, bDir: bDir, client: &http.Client{Timeout: soakTimeout}}
	s.b = f.joinAt(t, bDir)
	s.c = f.join(t)
	s.addOrders(t)

	var wg sync.WaitGroup
	chaosDone := make(chan struct{})
	go func() {
		defer close(chaosDone)
		s.chaos(t, rand.New(rand.NewPCG(seed, 0)))
	}()
	for i := range soakAgents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.agent(rand.New(rand.NewPCG(seed, uint64(i+1))), i, chaosDone)
		}()
	}
	wg.Wait()
	<-chaosDone
	s.calm(t)
	s.settle(t)
	s.check(t)
}

// soak is the fleet under test and what the agents did to it.
type soak struct {
	f       *fleet
	a, c    *proc
	bDir    string
	client  *http.Client
	mu      sync.Mutex
	b       *proc
	wfs     []soakWorkflow
	counts  map[string]int
	orders  []soakOrder
	chaosed []string
}

type soakWorkflow struct{ id, rep string }

type soakOrder struct {
	id, region string
	paid       int64
}

// members are the sidecars an agent may reach now.
func (s *soak) members() []*proc {
	s.mu.Lock()
	defer s.mu.Unlock()
	return []*proc{s.a, s.b, s.c}
}

func (s *soak) count(what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.counts == nil {
		s.counts = map[string]int{}
	}
	s.counts[what]++
}

// addOrders adds soakOrders shipped orders in both regions beside the
// fixture's five.
func (s *soak) addOrders(t *testing.T) {
	t.Helper()
	s.orders = []soakOrder{{"O-1001", "EU", 12000}, {"O-1002", "EU", 48000}, {"O-1003", "US", 8000}, {"O-1004", "US", 42000}}
	for i := range soakOrders {
		o := soakOrder{id: fmt.Sprintf("O-%d", 7000+i), region: []string{"EU", "US"}[i%2], paid: 20000 + int64(i)*5000}
		body := fmt.Sprintf(`{"id":%q,"region":%q,"customer":"customer-soak","paid":%d,"status":"shipped"}`, o.id, o.region, o.paid)
		res, err := http.Post(s.a.ep.Orders+"/_sim/orders", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusCreated && res.StatusCode != http.StatusOK {
			t.Fatalf("POST /_sim/orders %s: %d", o.id, res.StatusCode)
		}
		s.orders = append(s.orders, o)
	}
}

// send sends one request to p; status 0 means no answer came in time.
func (s *soak) send(p *proc, token, method, path, body string, v any) int {
	req, err := http.NewRequest(method, p.ep.Sidecar+path, strings.NewReader(body))
	if err != nil {
		return 0
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := s.client.Do(req)
	if err != nil {
		return 0
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return 0
	}
	if v != nil {
		_ = json.Unmarshal(b, v)
	}
	return res.StatusCode
}

// retry sends a request to a random member and, while none answers,
// to the others, as an agent that retries would; the body is the same
// every time.
func (s *soak) retry(r *rand.Rand, token, method, path, body string, v any) int {
	ms := s.members()
	first := r.IntN(len(ms))
	for k := range len(ms) {
		if status := s.send(ms[(first+k)%len(ms)], token, method, path, body, v); status != 0 {
			return status
		}
	}
	return 0
}

// agent runs random operations until done is closed.
func (s *soak) agent(r *rand.Rand, i int, done <-chan struct{}) {
	reps := []struct{ id, region, lead string }{{"rep-ana", "EU", "lead-dee"}, {"rep-ben", "US", "lead-eli"}}
	var mine []soakWorkflow
	for k := range soakMaxOps {
		select {
		case <-done:
			return
		default:
		}
		rep := reps[r.IntN(len(reps))]
		token := s.f.tokens[rep.id]
		switch op := r.IntN(10); {
		case op < 4 || len(mine) == 0: // a new workflow with a refund or a reship
			wf := soakWorkflow{id: fmt.Sprintf("W-soak-%d-%d", i, k), rep: rep.id}
			if s.retry(r, token, http.MethodPost, "/v1/workflows", `{"id":"`+wf.id+`","ticket":"T-soak"}`, nil) != http.StatusCreated {
				s.count("create unanswered")
				continue
			}
			mine = append(mine, wf)
			s.mu.Lock()
			s.wfs = append(s.wfs, wf)
			s.mu.Unlock()
			s.propose(r, wf, s.order(r, rep.region))
		case op < 6: // another step in one of mine
			wf := mine[r.IntN(len(mine))]
			s.propose(r, wf, s.order(r, map[string]string{"rep-ana": "EU", "rep-ben": "US"}[wf.rep]))
		case op < 7: // amend a step that waits
			wf := mine[r.IntN(len(mine))]
			var got struct{ Steps []step }
			if s.retry(r, s.f.tokens[wf.rep], http.MethodGet, "/v1/workflows/"+wf.id, "", &got) != http.StatusOK {
				continue
			}
			for _, st := range got.Steps {
				if st.Status == "waiting_approval" {
					s.count("amend")
					body := fmt.Sprintf(`{"args":{"order":%q,"amount":%d}}`, st.Args.Order, 100+r.IntN(4900))
					if st.Tool != "issue_refund" {
						break
					}
					s.retry(r, s.f.tokens[wf.rep], http.MethodPatch, fmt.Sprintf("/v1/workflows/%s/steps/%d", wf.id, st.N), body, nil)
					break
				}
			}
		case op < 8: // resume one of mine
			wf := mine[r.IntN(len(mine))]
			s.count("resume")
			s.retry(r, s.f.tokens[wf.rep], http.MethodPost, "/v1/workflows/"+wf.id+"/resume", "", nil)
		default: // a lead decides a pending approval of their region
			s.decide(r, rep.lead, r.IntN(4) == 0)
		}
	}
}

// order picks an order, mostly of region.
func (s *soak) order(r *rand.Rand, region string) soakOrder {
	for {
		o := s.orders[r.IntN(len(s.orders))]
		if o.region == region || r.IntN(8) == 0 {
			return o
		}
	}
}

// propose proposes a refund (mostly under the auto limit, some over it)
// or, one time in five, a reship, in wf.
func (s *soak) propose(r *rand.Rand, wf soakWorkflow, o soakOrder) {
	body := fmt.Sprintf(`{"tool":"issue_refund","args":{"order":%q,"amount":%d}}`, o.id, 100+r.IntN(4800))
	switch n := r.IntN(10); {
	case n < 2:
		body = fmt.Sprintf(`{"tool":"reship_order","args":{"order":%q}}`, o.id)
		s.count("propose reship")
	case n < 4:
		body = fmt.Sprintf(`{"tool":"issue_refund","args":{"order":%q,"amount":%d}}`, o.id, 5000+r.IntN(20000))
		s.count("propose refund over the auto limit")
	default:
		s.count("propose refund")
	}
	s.retry(r, s.f.tokens[wf.rep], http.MethodPost, "/v1/workflows/"+wf.id+"/steps", body, nil)
}

// decide has lead approve (or, reject set, reject) one pending approval.
func (s *soak) decide(r *rand.Rand, lead string, reject bool) bool {
	var list struct {
		Approvals []struct {
			ID         string `json:"id"`
			CanApprove bool   `json:"can_approve"`
		} `json:"approvals"`
	}
	if s.retry(r, s.f.tokens[lead], http.MethodGet, "/v1/approvals?status=pending", "", &list) != http.StatusOK {
		return false
	}
	for _, a := range list.Approvals {
		if !a.CanApprove && !reject {
			continue
		}
		verb := "approve"
		if reject {
			verb = "reject"
		}
		s.count(verb)
		s.retry(r, s.f.tokens[lead], http.MethodPost, "/v1/approvals/"+a.ID+"/"+verb, `{"comment":"soak"}`, nil)
		return true
	}
	return false
}

// Chaos events: the first four are a seeded permutation of these, so
// every kind happens at least once; the rest are drawn at random.
const (
	chaosKill = iota
	chaosFreeze
	chaosFreezeHeld
	chaosFault
	chaosKinds
)

// chaos kills, freezes and faults soakChaos times.
func (s *soak) chaos(t *testing.T, r *rand.Rand) {
	first := r.Perm(chaosKinds)
	for i := range soakChaos {
		time.Sleep(soakChaosEvery)     // chaos timing, not an assertion
		kind := r.IntN(chaosKinds + 2) // faults twice as often
		if i < len(first) {
			kind = first[i]
		}
		system := []string{s.a.ep.Ledger, s.a.ep.Orders}[r.IntN(2)]
		s.mu.Lock()
		b := s.b
		s.mu.Unlock()
		switch kind {
		case chaosKill:
			s.note("SIGKILL B, restart it over its directory")
			_ = b.cmd.Process.Kill()
			<-b.done
			nb := s.f.joinAt(t, s.bDir)
			s.mu.Lock()
			s.b = nb
			s.mu.Unlock()
		case chaosFreeze, chaosFreezeHeld:
			// Frozen past its leases, so C or A takes its workflows over;
			// with writes held, B is likely frozen with a request in
			// flight that lands after the takeover.
			if kind == chaosFreezeHeld {
				s.note("writes held on " + system + ", SIGSTOP B past its leases, SIGCONT")
				putFaults(t, system, `{"delay_writes_ms":2000}`)
			} else {
				s.note("SIGSTOP B past its leases, SIGCONT")
			}
			time.Sleep(200 * time.Millisecond) // chaos timing, not an assertion
			_ = b.cmd.Process.Signal(syscall.SIGSTOP)
			time.Sleep(3 * leaseTTL)
			_ = b.cmd.Process.Signal(syscall.SIGCONT)
			if kind == chaosFreezeHeld {
				putFaults(t, system, `{}`)
			}
		default:
			faults := []string{`{"lose_response":1}`, `{"unavailable":1}`, `{"delay_writes_ms":2500}`, `{"lose_response":1,"delay_writes_ms":1500}`}
			body := faults[r.IntN(len(faults))]
			s.note("faults " + body + " on " + system)
			putFaults(t, system, body)
		}
	}
}

func (s *soak) note(what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.chaosed = append(s.chaosed, what)
}

// calm ends every fault and thaws B.
func (s *soak) calm(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	b := s.b
	s.mu.Unlock()
	_ = b.cmd.Process.Signal(syscall.SIGCONT)
	putFaults(t, s.a.ep.Ledger, `{}`)
	putFaults(t, s.a.ep.Orders, `{}`)
}

func putFaults(t *testing.T, system, body string) {
	req, err := http.NewRequest(http.MethodPut, system+"/_sim/faults", strings.NewReader(body))
	if err != nil {
		t.Error(err)
		return
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("PUT %s/_sim/faults: %v", system, err)
		return
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK && res.StatusCode != http.StatusNoContent {
		t.Errorf("PUT %s/_sim/faults %s: %d", system, body, res.StatusCode)
	}
}

// settled is whether no step of the soak's workflows waits for anything
// but a person who has been asked (none, after the leads decide).
func settledStatus(status string) bool {
	switch status {
	case "done", "denied", "suppressed", "compensated":
		return true
	}
	return false
}

// settle has the leads decide every pending approval (rejecting what they
// may not approve) and the agents resume, until every step has settled.
func (s *soak) settle(t *testing.T) {
	t.Helper()
	r := rand.New(rand.NewPCG(0, 0))
	var open []string
	var statuses map[string]int
	s.a.until(t, "every step settled", func() bool {
		statuses = map[string]int{}
		for s.decide(r, "lead-dee", false) || s.decide(r, "lead-eli", false) || s.decide(r, "lead-dee", true) || s.decide(r, "lead-eli", true) {
		}
		open = open[:0]
		for _, wf := range s.wfs {
			var got struct{ Steps []step }
			token := s.f.tokens[wf.rep]
			if s.send(s.a, token, http.MethodGet, "/v1/workflows/"+wf.id, "", &got) != http.StatusOK {
				open = append(open, wf.id+" unreadable")
				continue
			}
			for _, st := range got.Steps {
				statuses[st.Status]++
				if !settledStatus(st.Status) {
					open = append(open, fmt.Sprintf("%s/%d %s", wf.id, st.N, st.Status))
					s.send(s.a, token, http.MethodPost, "/v1/workflows/"+wf.id+"/resume", "", nil)
					break
				}
			}
		}
		return len(open) == 0
	})
	t.Logf("every step settled: %v", statuses)
}

// check holds the invariants against the systems of record.
func (s *soak) check(t *testing.T) {
	t.Helper()
	var entries struct {
		Entries []struct {
			Kind, Order string
			Amount      int64
		}
	}
	getJSON(t, s.a.ep.Ledger+"/entries", &entries)
	refunded := map[string]int64{}
	for _, e := range entries.Entries {
		if e.Kind == "refund" {
			refunded[e.Order] += e.Amount
		}
	}
	for _, o := range s.orders {
		if refunded[o.id] > o.paid {
			t.Errorf("order %s: %d cents refunded, %d paid", o.id, refunded[o.id], o.paid)
		}
	}
	var ships struct {
		Shipments []struct{ ID, Order, Reference string }
	}
	getJSON(t, s.a.ep.Orders+"/shipments", &ships)
	byRef := map[string][]string{}
	for _, sh := range ships.Shipments {
		if sh.Reference != "" {
			byRef[sh.Reference] = append(byRef[sh.Reference], sh.ID)
		}
	}
	for ref, ids := range byRef {
		if len(ids) > 1 {
			t.Errorf("reference %s shipped %d times: %v", ref, len(ids), ids)
		}
	}
	ops := s.f.tokens["ops-ida"]
	var rec struct {
		Unexplained *int           `json:"unexplained"`
		Classes     map[string]int `json:"classes"`
	}
	s.a.call(t, ops, http.MethodPost, "/v1/reconciliations", "", http.StatusOK, &rec)
	if rec.Unexplained == nil || *rec.Unexplained != 0 {
		t.Errorf("reconciliation: classes %v; want nothing unexplained", rec.Classes)
	}
	s.a.verifyAudit(t, ops)
	var kinds []string
	for k, n := range s.counts {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
	}
	slices.Sort(kinds)
	t.Logf("%d workflows, %d refund entries, %d shipments; %s; chaos: %s", len(s.wfs), len(entries.Entries), len(ships.Shipments),
		strings.Join(kinds, ", "), strings.Join(s.chaosed, "; "))
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	if err := json.NewDecoder(res.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}
