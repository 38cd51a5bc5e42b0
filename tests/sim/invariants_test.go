package sim

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/countersign/countersign/executor/credential"
	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/sim/ledger"
	"github.com/countersign/countersign/executor/sim/orders"
	"github.com/countersign/countersign/executor/simclock"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

// TestInvariantsCatchWhatNoRemovedControlBreaks feeds the end-of-seed
// checks records that break the invariants no control removal reaches
// (the caps are held by the decision transaction itself), and records
// that keep them.
func TestInvariantsCatchWhatNoRemovedControlBreaks(t *testing.T) {
	refund := func(wf string, n int, order string, amount money.Cents, at time.Duration) store.Step {
		return store.Step{Workflow: wf, N: n, Tool: tool.IssueRefund, Args: tool.Args{Order: order, Amount: amount},
			Status: store.StepDone, Key: wf + "-key-" + string(rune('a'+n)), Approval: "AP-" + wf, ReservedAt: begin.Add(at)}
	}
	entry := func(s store.Step) ledger.Entry {
		return ledger.Entry{Kind: ledger.KindRefund, Order: s.Args.Order, Amount: int64(s.Args.Amount), Key: s.Key, By: "rep-ana"}
	}
	reship := func(order, ref string) orders.Shipment {
		return orders.Shipment{Kind: orders.KindReship, Order: order, Reference: ref}
	}
	for _, c := range []struct {
		name  string
		steps []store.Step
		ships []orders.Shipment
		want  []Invariant
	}{
		{"refunds within every cap keep every invariant",
			[]store.Step{refund("W-1", 1, "O-1", 20000, 0), refund("W-2", 1, "O-2", 20000, 2*time.Hour)}, nil, nil},
		{"a rep's day above the cap breaks rep_day_cap",
			[]store.Step{refund("W-1", 1, "O-1", 30000, 0), refund("W-1", 2, "O-2", 15000, 3*time.Hour)}, nil, []Invariant{InvRepDay}},
		{"the agent's hour above the cap breaks agent_hour_cap",
			[]store.Step{refund("W-1", 1, "O-1", 30000, 0), refund("W-2", 1, "O-2", 25000, 30*time.Minute)}, nil, []Invariant{InvAgentHour}},
		{"a third reshipment breaks reships_within_R10_R11",
			[]store.Step{{Workflow: "W-1", N: 1, Tool: tool.ReshipOrder, Args: tool.Args{Order: "O-1"}, Status: store.StepDone},
				{Workflow: "W-2", N: 1, Tool: tool.ReshipOrder, Args: tool.Args{Order: "O-1"}, Status: store.StepDone},
				{Workflow: "W-3", N: 1, Tool: tool.ReshipOrder, Args: tool.Args{Order: "O-1"}, Status: store.StepDone}},
			[]orders.Shipment{reship("O-1", "a"), reship("O-1", "b"), reship("O-1", "c")}, []Invariant{InvReshipLimit}},
		{"a refund above the rep's $500 ceiling breaks refunds_within_the_reps_ceiling",
			[]store.Step{refund("W-1", 1, "O-1", 50001, 0)}, nil, []Invariant{InvCeiling, InvRepDay}},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := &world{clock: simclock.New(begin), trace: newTrace(),
				limits:    policy.Limits{RefundAuto: 5000, RepDaily: 40000, RepWindow: 24 * time.Hour, AgentHourly: 50000},
				orderList: []orders.Order{{ID: "O-1", Paid: 60000}, {ID: "O-2", Paid: 60000}},
				workflows: []workflow{{"W-1", "rep-ana"}, {"W-2", "rep-ben"}, {"W-3", "rep-ben"}}}
			f := facts{steps: c.steps, shipments: c.ships, wfRep: map[string]string{}, approvals: map[string]store.Approval{}}
			for _, s := range c.steps {
				f.approvals[s.Approval] = store.Approval{ID: s.Approval, Status: store.ApprovalUsed, CallHash: "bound elsewhere"}
				if s.Tool == tool.IssueRefund {
					f.entries = append(f.entries, entry(s))
				}
			}
			for _, wf := range w.workflows {
				f.wfRep[wf.id] = wf.rep
			}
			w.checkLedger(f)
			w.checkCaps(f)
			w.checkShipments(f)
			var got []Invariant
			for _, v := range w.violations {
				got = append(got, v.Invariant)
			}
			if len(got) != len(c.want) || (len(got) > 0 && got[0] != c.want[0]) {
				t.Errorf("violations %v, want %v", w.violations, c.want)
			}
		})
	}
}

// TestRevokedEpochCaughtAtTheReceiver: a receiver that accepts a write
// under a token of an epoch raised past breaks InvEpoch (no control
// guards it: the receivers' own key check does); one of the current
// epoch, or a refusal, does not.
func TestRevokedEpochCaughtAtTheReceiver(t *testing.T) {
	auth, err := credential.Open(credential.Options{Dir: t.TempDir(), Clock: simclock.New(begin)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := auth.Raise(context.Background()); err != nil {
		t.Fatal(err)
	}
	token := func(epoch int) string {
		claims := base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, `{"epoch":%d}`, epoch))
		return "Bearer eyJhbGciOiJFZERTQSJ9." + claims + ".c2ln"
	}
	for _, c := range []struct {
		name   string
		epoch  int
		status int
		want   int
	}{
		{"a write accepted under the revoked epoch 1", 1, http.StatusCreated, 1},
		{"a write accepted under the current epoch 2", 2, http.StatusCreated, 0},
		{"a write refused under the revoked epoch 1", 1, http.StatusUnauthorized, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := &world{clock: simclock.New(begin), trace: newTrace(), auth: auth}
			n := &network{w: w}
			h := http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) { rw.WriteHeader(c.status) })
			n.serve(h, held{host: "ledger.sim", method: http.MethodPost, path: "/refunds", label: "ledger.sim POST /refunds",
				header: http.Header{"Authorization": {token(c.epoch)}}})
			if len(w.violations) != c.want || (c.want > 0 && w.violations[0].Invariant != InvEpoch) {
				t.Errorf("violations %v, want %d of %s", w.violations, c.want, InvEpoch)
			}
		})
	}
}
