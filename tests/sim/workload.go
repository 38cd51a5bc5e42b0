package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/fixture"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

// person is a fixture person as the engine takes one: the identity the
// sidecar's authn would have verified.
func person(id string) engine.Person {
	p, _ := fixture.PersonByID(id)
	return engine.Person{ID: p.ID, Role: p.Role, Region: p.Region, Scopes: p.Scopes, RefundCeiling: p.RefundCeiling, ApproveLimit: p.ApproveLimit}
}

var (
	reps  = []string{"rep-ana", "rep-ben"}
	leads = map[string][]string{"EU": {"lead-dee"}, "US": {"lead-eli", "lead-fay"}}
)

// event is one thing that happens in a world, drawn by the scheduler.
type event struct {
	weight int
	name   string
	do     func(w *world, ctx context.Context) error
}

// events are the workload and the faults, with their relative weights.
var events = []event{
	{12, "open", (*world).openWorkflow},
	{30, "refund", (*world).proposeRefund},
	{8, "reship", (*world).proposeReship},
	{16, "lead", (*world).leadActs},
	{8, "resume", (*world).repResumes},
	{4, "repeat", (*world).repeatCall},
	{4, "amend", (*world).amendWaiting},
	{4, "switch", (*world).flipSwitch},
	{4, "deliver", func(w *world, _ context.Context) error { w.net.release(1 + w.rng.IntN(3)); return nil }},
	{3, "jump", func(w *world, _ context.Context) error {
		d := time.Duration(5+w.rng.IntN(36)) * time.Minute
		w.clock.Advance(d)
		w.tracef("clock jumps %s", d)
		return nil
	}},
	{8, "arm", func(w *world, _ context.Context) error {
		w.armed = failpoints[w.rng.IntN(len(failpoints))]
		w.tracef("arm crash at %s", w.armed)
		return nil
	}},
	{2, "kill", func(w *world, ctx context.Context) error {
		sc := w.pick()
		w.tracef("kill %s", sc.name)
		return w.restart(ctx, sc)
	}},
	{3, "store", (*world).armStore},
	{2, "epoch", (*world).raiseEpoch},
	{3, "release", (*world).release},
	{2, "rep-approves", (*world).repApprovesEvent},
	{3, "pause", (*world).pause},
	{4, "unpause", (*world).unpause},
	{4, "sweep", (*world).sweep},
}

var totalWeight = func() int {
	n := 0
	for _, e := range events {
		n += e.weight
	}
	return n
}()

// planned is one event of a seed's plan: what happens, after how long a
// pause, and the seed of the random source it and the network draw
// from while it runs. Each event has its own source, so that dropping
// events from a plan (shrinking) leaves the others' draws as they were.
type planned struct {
	event int
	pause time.Duration
	seed  uint64
}

// plan draws n events from r.
func plan(r *rand.Rand, n int) []planned {
	out := make([]planned, n)
	for i := range out {
		k, e := r.IntN(totalWeight), 0
		for ; k >= events[e].weight; e++ {
			k -= events[e].weight
		}
		out[i] = planned{event: e, pause: time.Duration(1+r.IntN(90)) * time.Second, seed: r.Uint64()}
	}
	return out
}

// step runs one planned event. A store set to go down at the start of
// the next call goes down now; whatever went down comes back up when the
// event ends, and again after a crash's restart, whose resume may have
// reached the point it was set to go down at.
func (w *world) step(ctx context.Context, p planned) error {
	w.rng = rand.New(rand.NewPCG(p.seed, w.seed))
	w.clock.Advance(p.pause)
	w.tracef("- %s", events[p.event].name)
	if w.downAt == "call" {
		w.downAt, w.storeDown = "", true
	}
	err := events[p.event].do(w, ctx)
	w.quiesce() // a done step answered before durable is durable (or failed) before the next event
	w.storeUp()
	if errors.Is(err, engine.ErrCrashed) {
		err = w.restart(ctx, w.crashed)
		w.storeUp() // it went down during the restart's resume
	}
	return err
}

// storeUp ends a failure of the store's writes.
func (w *world) storeUp() {
	if w.storeDown {
		w.storeDown = false
		w.tracef("the store writes again")
	}
}

func (w *world) openWorkflow(ctx context.Context) error {
	if len(w.workflows) >= 8 {
		return nil
	}
	wf := workflow{id: fmt.Sprintf("W-%d", len(w.workflows)+1), rep: reps[w.rng.IntN(len(reps))]}
	sc := w.pick()
	_, _, err := sc.eng.CreateWorkflow(ctx, person(wf.rep), wf.id, "T-"+wf.id)
	w.tracef("%s: open %s for %s: %s", sc.name, wf.id, wf.rep, errClass(err))
	if err != nil {
		return w.fatal(err)
	}
	w.workflows = append(w.workflows, wf)
	return nil
}

// pickWorkflow is a random workflow, or false when there is none yet.
func (w *world) pickWorkflow() (workflow, bool) {
	if len(w.workflows) == 0 {
		return workflow{}, false
	}
	return w.workflows[w.rng.IntN(len(w.workflows))], true
}

// pickOrder is an order of the rep's region, now and then another's.
func (w *world) pickOrder(rep string) (id string, paid int64) {
	region := person(rep).Region
	for range 8 {
		o := w.orderList[w.rng.IntN(len(w.orderList))]
		if o.Region == region || w.rng.IntN(10) == 0 {
			return o.ID, o.Paid
		}
	}
	o := w.orderList[0]
	return o.ID, o.Paid
}

// refundAmount is near one of the limits: the auto limit, what the order
// paid, the maximum (a rep's ceiling: $20 below to $200 above it), or
// anywhere up to it, or small.
func (w *world) refundAmount(paid int64) int64 {
	auto := int64(w.limits.RefundAuto)
	var a int64
	switch w.rng.IntN(6) {
	case 0:
		a = 100 + w.rng.Int64N(auto)
	case 1:
		a = auto - 1000 + w.rng.Int64N(2001)
	case 2:
		a = paid - 2000 + w.rng.Int64N(2501)
	case 3:
		a = auto/2 + w.rng.Int64N(auto)
	case 4:
		a = int64(w.limits.RefundMax) - 2000 + w.rng.Int64N(22001)
	default:
		a = 5000 + w.rng.Int64N(int64(w.limits.RefundMax))
	}
	return max(a, 1)
}

func (w *world) proposeRefund(ctx context.Context) error {
	wf, ok := w.pickWorkflow()
	if !ok {
		return nil
	}
	order, paid := w.pickOrder(wf.rep)
	call := map[string]any{"order": order, "amount": w.refundAmount(paid)}
	if w.rng.IntN(20) == 0 {
		call["approved_by"] = "lead-dee" // a model claiming an approval it does not have
	}
	args, _ := json.Marshal(call)
	return w.propose(ctx, wf, tool.IssueRefund, args)
}

func (w *world) proposeReship(ctx context.Context) error {
	wf, ok := w.pickWorkflow()
	if !ok {
		return nil
	}
	order, _ := w.pickOrder(wf.rep)
	args, _ := json.Marshal(map[string]any{"order": order})
	return w.propose(ctx, wf, tool.ReshipOrder, args)
}

func (w *world) propose(ctx context.Context, wf workflow, name tool.Name, args []byte) error {
	w.last = lastCall{wf: wf, tool: name, args: args}
	sc := w.pick()
	if w.drivenElsewhere(sc, wf.id) {
		return nil
	}
	s, err := sc.eng.Propose(ctx, person(wf.rep), wf.id, name, args)
	w.tracef("%s: propose %s %s %s: %s %s", sc.name, wf.id, name, args, errClass(err), stepLine(s))
	if err == nil || errors.Is(err, engine.ErrUnavailable) {
		w.ack(s)
	}
	return ignorable(err)
}

// ack remembers a step a sidecar answered done, and whether the store
// was failing writes as it answered.
func (w *world) ack(steps ...store.Step) {
	for _, s := range steps {
		id := fmt.Sprintf("%s/%d", s.Workflow, s.N)
		if s.Status == store.StepDone {
			w.acked[id] = ack{ref: stepRef{s.Workflow, s.N}, lost: w.storeDown || w.acked[id].lost}
		}
	}
}

// leadActs has a lead approve or reject a pending approval, or let it
// wait, and the rep's agent then mostly resumes the workflow.
func (w *world) leadActs(ctx context.Context) error {
	sc := w.pick()
	pending, err := sc.eng.Approvals(ctx, store.ApprovalPending)
	if err != nil {
		return w.fatal(err)
	}
	if len(pending) == 0 {
		return nil
	}
	a := pending[w.rng.IntN(len(pending))]
	ls := leads[a.RequesterRegion]
	if len(ls) == 0 {
		ls = leads["EU"]
	}
	lead := person(ls[w.rng.IntN(len(ls))])
	switch r := w.rng.IntN(10); {
	case r < 6:
		_, err = sc.eng.Approve(ctx, lead, a.ID, "sim")
		w.tracef("%s: %s approves %s (%s/%d): %s", sc.name, lead.ID, a.ID, a.Workflow, a.N, errClass(err))
	case r < 8:
		_, err = sc.eng.Reject(ctx, lead, a.ID, "sim")
		w.tracef("%s: %s rejects %s (%s/%d): %s", sc.name, lead.ID, a.ID, a.Workflow, a.N, errClass(err))
	default:
		w.tracef("%s lets %s wait", lead.ID, a.ID)
		return nil
	}
	if err := ignorable(err); err != nil {
		return err
	}
	if w.rng.IntN(10) < 7 {
		return w.resume(ctx, a.Workflow)
	}
	return nil
}

func (w *world) repResumes(ctx context.Context) error {
	wf, ok := w.pickWorkflow()
	if !ok {
		return nil
	}
	return w.resume(ctx, wf.id)
}

func (w *world) resume(ctx context.Context, id string) error {
	sc := w.pick()
	if w.drivenElsewhere(sc, id) {
		return nil
	}
	snap, err := sc.eng.Resume(ctx, person(w.repOf(id)), id)
	w.tracef("%s: resume %s: %s", sc.name, id, errClass(err))
	for _, s := range snap.Steps {
		w.tracef("  %s", stepLine(s))
	}
	if err == nil || errors.Is(err, engine.ErrUnavailable) {
		w.ack(snap.Steps...)
	}
	return ignorable(err)
}

func (w *world) flipSwitch(ctx context.Context) error {
	name := []tool.Name{tool.IssueRefund, tool.ReshipOrder}[w.rng.IntN(2)]
	on := !w.switches[name]
	sc := w.pick()
	err := sc.eng.SetSwitch(ctx, person("ops-ida"), name, on, "sim")
	w.tracef("%s: switch %s on=%v: %s", sc.name, name, on, errClass(err))
	if err != nil {
		return w.fatal(err)
	}
	w.switches[name] = on
	return nil
}

// ignorable passes on a crash and a failure of the harness itself, and
// drops what the engine answers a caller in the ordinary course (a
// denial, an unavailable system, an approval no longer pending).
func ignorable(err error) error {
	if err == nil || errors.Is(err, engine.ErrCrashed) {
		return err
	}
	return nil
}

// fatal is an error the harness cannot go on from, unless the store was
// failing writes: then a write the event needed failed, as it may.
func (w *world) fatal(err error) error {
	if err == nil || errors.Is(err, engine.ErrCrashed) {
		return err
	}
	if w.storeDown {
		w.tracef("a write failed: the store is down")
		return nil
	}
	return fmt.Errorf("sim: %w", err)
}

// lastCall is the last call an agent proposed.
type lastCall struct {
	wf   workflow
	tool tool.Name
	args []byte
}

// repeatCall has the agent propose its last call again, as an agent
// that lost the answer, or a looping model, does.
func (w *world) repeatCall(ctx context.Context) error {
	if w.last.tool == "" {
		return nil
	}
	w.tracef("the agent repeats its last call")
	return w.propose(ctx, w.last.wf, w.last.tool, w.last.args)
}

// amendWaiting has the rep's agent change the amount of a refund that
// waits for an approval, pending or already given.
func (w *world) amendWaiting(ctx context.Context) error {
	var waiting []store.Step
	sc := w.pick()
	err := w.db.View(func(tx *store.Tx) error {
		return tx.AllSteps(func(s store.Step) error {
			if s.Status == store.StepWaitingApproval && s.Tool == tool.IssueRefund {
				waiting = append(waiting, s)
			}
			return nil
		})
	})
	if err != nil {
		return w.fatal(err)
	}
	if len(waiting) == 0 {
		return nil
	}
	s := waiting[w.rng.IntN(len(waiting))]
	if w.drivenElsewhere(sc, s.Workflow) {
		return nil
	}
	amount := int64(s.Args.Amount) + w.rng.Int64N(4001) - 1000
	args, _ := json.Marshal(map[string]any{"order": s.Args.Order, "amount": max(amount, 1)})
	rep := w.repOf(s.Workflow)
	got, err := sc.eng.Amend(ctx, person(rep), s.Workflow, s.N, args)
	w.tracef("%s: amend %s/%d to %s: %s %s", sc.name, s.Workflow, s.N, args, errClass(err), stepLine(got))
	if err == nil || errors.Is(err, engine.ErrUnavailable) {
		w.ack(got)
	}
	return ignorable(err)
}

func (w *world) repOf(wf string) string {
	for _, x := range w.workflows {
		if x.id == wf {
			return x.rep
		}
	}
	return ""
}
