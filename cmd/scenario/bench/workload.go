package bench

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/countersign/countersign/executor/fixture"
	"github.com/countersign/countersign/executor/tool"
)

// reps are the fixture's representatives who may refund, one per region:
// agent i works for reps[i%2].
var reps = []string{"rep-ana", "rep-ben"}

// refundCents is every step's amount.
const refundCents = 1

// orderPaid is what each bench order was paid: p1's R4 never binds.
const orderPaid = 100000

// agent is one agent's state within a cell. Only its goroutine touches it.
type agent struct {
	prefix  string // of its workflow ids and idempotency keys
	sidecar string // base URL of the sidecar it talks to
	slot    int    // sidecar's index in target.sidecars
	rep     fixture.Person
	token   string
	order   string
	left    int // refunds still to make on order
	seq     int
}

// nextID is a fresh workflow id or idempotency key.
func (a *agent) nextID() string {
	a.seq++
	return a.prefix + "-" + strconv.Itoa(a.seq)
}

// newAgents makes n agents for one cell, each with an order of its own.
func (t *target) newAgents(ctx context.Context, system string, n int) ([]*agent, error) {
	agents := make([]*agent, n)
	for i := range agents {
		p, ok := fixture.PersonByID(reps[i%len(reps)])
		if !ok {
			return nil, fmt.Errorf("bench: the fixture has no %s", reps[i%len(reps)])
		}
		a := &agent{prefix: fmt.Sprintf("bench-%s-%s-%da-%d", t.run, system, n, i), rep: p, token: t.tokens[p.ID],
			sidecar: t.sidecars[i%len(t.sidecars)], slot: i % len(t.sidecars)}
		if system == "countersign" && a.token == "" {
			return nil, fmt.Errorf("bench: no token for %s among the dev tokens", p.ID)
		}
		if err := t.renewOrder(ctx, a); err != nil {
			return nil, err
		}
		agents[i] = a
	}
	return agents, nil
}

// renewOrder gives a an order of its own that no refund has touched.
func (t *target) renewOrder(ctx context.Context, a *agent) error {
	for range 100 {
		id := "O-" + strconv.FormatUint(t.nextOrder.Add(1), 10)
		body := map[string]any{"id": id, "region": a.rep.Region, "customer": "bench", "paid": orderPaid, "status": fixture.StatusShipped}
		var e struct {
			Error errorAnswer `json:"error"`
		}
		status, err := t.post(ctx, t.orders+"/_sim/orders", "", nil, body, &e)
		switch {
		case err != nil:
			return fmt.Errorf("bench: add order %s: %w", id, err)
		case status == http.StatusCreated:
			a.order, a.left = id, RefundsPerOrder
			return nil
		case status != http.StatusOK: // 200: it exists already, take the next id
			return fmt.Errorf("bench: add order %s: the order system answered %d %s", id, status, e.Error.Code)
		}
	}
	return fmt.Errorf("bench: 100 order ids in a row exist already in the order system")
}

// outcome is one step: done, or the problem it met, and how long its
// requests took.
type outcome struct {
	problem string // empty when done
	propose time.Duration
	total   time.Duration // create+propose; zero for the glue
}

// system is what a cell drives.
type system interface {
	name() string
	step(ctx context.Context, t *target, a *agent) outcome
}

// countersign drives the sidecar's API as an agent does: each step one
// request that opens its workflow and proposes in it, or with twoRequests
// the two of them apart.
type countersign struct{ twoRequests bool }

func (countersign) name() string { return "countersign" }

// stepAnswer is what the bench reads of the sidecar's answers.
type stepAnswer struct {
	Status string       `json:"status"`
	Rule   string       `json:"rule"`
	Error  *errorAnswer `json:"error"`
}

func (c countersign) step(ctx context.Context, t *target, a *agent) outcome {
	wf, ticket := a.nextID(), "BENCH-"+t.run
	var ans stepAnswer
	call := map[string]any{"tool": tool.IssueRefund, "args": tool.Args{Order: a.order, Amount: refundCents}}
	t0 := time.Now()
	if c.twoRequests {
		status, err := t.post(ctx, a.sidecar+"/v1/workflows", a.token, nil,
			map[string]string{"ticket": ticket, "id": wf}, &ans)
		if err != nil || status != http.StatusCreated {
			return outcome{problem: "create workflow: " + describe(status, err, ans)}
		}
	} else {
		call["ticket"] = ticket
	}
	t1 := time.Now()
	ans = stepAnswer{}
	status, err := t.post(ctx, a.sidecar+"/v1/workflows/"+wf+"/steps", a.token, nil, call, &ans)
	t2 := time.Now()
	if err != nil || status != http.StatusOK || ans.Status != "done" {
		return outcome{problem: "propose: " + describe(status, err, ans)}
	}
	return outcome{propose: t2.Sub(t1), total: t2.Sub(t0)}
}

// describe names an answer that is not the one wanted, in words that group
// alike answers together (no ids, no ports).
func describe(status int, err error, ans stepAnswer) string {
	if status == 0 {
		return "no answer"
	}
	s := "HTTP " + strconv.Itoa(status)
	if err != nil {
		return s + " unreadable"
	}
	for _, part := range []string{ans.Status, ans.Rule} {
		if part != "" {
			s += " " + part
		}
	}
	if ans.Error != nil && ans.Error.Code != "" {
		s += " " + ans.Error.Code
	}
	return s
}
