package drill

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/countersign/countersign/cmd/devstack"
	"github.com/countersign/countersign/executor/audit"
	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/fixture"
	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/monitor"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/sim/orders"
	"github.com/countersign/countersign/executor/simclock"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

// The incident's schedule. The delays after the alert are assumptions of
// the scenario, not measurements.
const (
	releaseAt        = 60 * time.Minute // p2, by break-glass
	containDelay     = 10 * time.Minute // after the first invariant alert
	fixAfterRelease  = 30 * time.Minute // p3
	fixAfterContain  = 5 * time.Minute  // the fix never precedes containment by less
	reenableAfterFix = 5 * time.Minute
	leadsEvery       = 2 * time.Minute
	monitorEvery     = 5 * time.Minute
	approveShare     = 0.6
)

// start is the simulated time the drill begins at. It is fixed so that the
// simulated times in the JSON report are the same on every run.
var start = time.Date(2026, time.March, 2, 9, 0, 0, 0, time.UTC)

// The person who operates: releases, contains, fixes and re-enables.
const operatorID = "ops-ida"

// approverID is the second operator that a break-glass release needs.
const approverID = "ops-jon"

// Options configure a drill.
type Options struct {
	Seed uint64
	// DataDir keeps the stack's files (the store, the ledger, the order
	// system, the keys and the drill's bundles) for inspection afterwards;
	// it must be empty or absent. Empty: a temporary directory removed at
	// the end.
	DataDir string
	// Progress receives a line per simulated minute. Optional.
	Progress io.Writer
	// Logger receives the stack's logs. Default: discard.
	Logger *slog.Logger
	// Inspect, when set, is called once the report is complete and before
	// the stack closes, so that a test can read the systems of record
	// itself rather than trust the report.
	Inspect func(ctx context.Context, st *devstack.Stack, r *Report) error
}

// Run runs the drill for o.Seed and returns its report.
func Run(ctx context.Context, o Options) (_ *Report, err error) {
	dir := o.DataDir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "countersign-drill-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	} else if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return nil, fmt.Errorf("drill: %s is not empty: a drill starts from nothing", dir)
	}
	r := &run{
		o: o, clock: simclock.New(start),
		leadsRNG: rand.New(rand.NewPCG(o.Seed, streamLeads)),
		tickets:  tickets(o.Seed),
		people:   map[string]engine.Person{},
		bundles:  map[string]*policy.Bundle{},
		report:   &Report{Seed: o.Seed},
		minute:   -1,
	}
	for _, p := range fixture.People() {
		ep := engine.Person{ID: p.ID, Role: p.Role, Region: p.Region, Scopes: p.Scopes,
			RefundCeiling: p.RefundCeiling, ApproveLimit: p.ApproveLimit}
		r.people[p.ID] = ep
		if p.Role == fixture.RoleLead {
			r.leads = append(r.leads, ep)
		}
	}
	slices.SortFunc(r.leads, func(a, b engine.Person) int { return strings.Compare(a.ID, b.ID) })
	r.byWorkflow = make(map[string]*ticket, len(r.tickets))
	for i := range r.tickets {
		r.byWorkflow[r.tickets[i].Workflow] = &r.tickets[i]
	}

	st, err := devstack.Start(ctx, devstack.Options{
		DataDir: dir, Clock: r.clock, Entropy: entropy(o.Seed), Logger: o.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("drill: start the stack: %w", err)
	}
	defer func() {
		if cerr := st.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("drill: stop the stack: %w", cerr)
		}
	}()
	r.st = st
	if err := r.setup(ctx, dir); err != nil {
		return nil, err
	}
	if err := r.traffic(ctx); err != nil {
		return nil, err
	}
	if err := r.afterTraffic(ctx); err != nil {
		return nil, err
	}
	if o.Inspect != nil {
		if err := o.Inspect(ctx, st, r.report); err != nil {
			return r.report, err
		}
	}
	return r.report, nil
}

// entropy is the seeded source of audit ids.
func entropy(seed uint64) io.Reader {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], seed)
	return rand.NewChaCha8(sha256.Sum256(append([]byte("countersign drill audit ids\n"), b[:]...)))
}

// mark is when something happened, as an offset from the start.
type mark struct {
	at time.Duration
	ok bool
}

// run is one drill in progress.
type run struct {
	o          Options
	st         *devstack.Stack
	clock      *simclock.Clock
	leadsRNG   *rand.Rand
	tickets    []ticket
	byWorkflow map[string]*ticket
	people     map[string]engine.Person
	leads      []engine.Person // by id
	bundles    map[string]*policy.Bundle
	reasons    map[string]string // break-glass reason per revision
	q          queue

	release, alert, contain mark
	pausedAtFix             []string
	minute                  int // of the last progress line
	arrived                 int // tickets so far
	report                  *Report
}

// setup shows the gate, loads the drill's bundles, installs p1 and adds
// the orders the tickets are about.
func (r *run) setup(ctx context.Context, dir string) error {
	bdir := filepath.Join(dir, "bundles")
	r.reasons = map[string]string{}
	for _, name := range []string{"p1", "p2", "p3"} {
		shipped, err := embedded(name)
		if err != nil {
			return err
		}
		b, err := drillBundle(bdir, name)
		if err != nil {
			return err
		}
		v, err := gate(ctx, shipped, b)
		if err != nil {
			return err
		}
		r.bundles[name], r.report.Gate = b, append(r.report.Gate, v)
		if name != "p2" && !v.Passed {
			return fmt.Errorf("drill: the gate rejects %s as shipped (%d case(s), %d Rego test(s)): the drill installs only a bundle the gate passes",
				name, len(v.Failures), len(v.TestFailures))
		}
		r.reasons[name] = fmt.Sprintf("drill environment: caps raised to %s per rep per day and %s per hour; "+
			"the gate fails this copy only on its %d cap case(s) and passes the %s bundle as shipped",
			drillRepDaily, drillAgentHourly, len(v.CopyFailures), name)
	}
	r.reasons["p2"] = "urgent change of the refund limits, released without the gate"
	if err := r.activate(ctx, "p1"); err != nil {
		return err
	}
	for _, t := range r.tickets {
		o := orders.Order{ID: t.Order, Region: t.Region, Customer: t.Customer, Paid: int64(t.Paid), Status: fixture.StatusShipped}
		if _, err := r.st.Orders.PutOrder(o); err != nil {
			return fmt.Errorf("drill: add order %s: %w", t.Order, err)
		}
	}
	return nil
}

func (r *run) activate(ctx context.Context, rev string) error {
	_, err := r.st.Releases.ActivateBundle(ctx, r.bundles[rev], policy.Activation{
		By: approverID, Proposer: operatorID, BreakGlass: true, Reason: r.reasons[rev],
	})
	if err != nil {
		return fmt.Errorf("drill: activate %s: %w", rev, err)
	}
	return nil
}

// traffic runs the three hours, event by event.
func (r *run) traffic(ctx context.Context) error {
	for i, t := range r.tickets {
		r.q.push(event{at: t.At, kind: evTicket, ticket: i})
	}
	for at := leadsEvery; at <= duration; at += leadsEvery {
		r.q.push(event{at: at, kind: evLeads})
	}
	for at := monitorEvery; at <= duration; at += monitorEvery {
		r.q.push(event{at: at, kind: evMonitor})
	}
	r.q.push(event{at: releaseAt, kind: evRelease})
	for len(r.q) > 0 {
		e := r.q.pop()
		if e.at > duration {
			break
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		r.clock.Set(start.Add(e.at))
		r.progress(e.at)
		var err error
		switch e.kind {
		case evRelease:
			err = r.onRelease(ctx)
		case evContain:
			err = r.onContain(ctx)
		case evFix:
			err = r.onFix(ctx)
		case evReenable:
			err = r.onReenable(ctx)
		case evMonitor:
			err = r.onMonitor(ctx)
		case evLeads:
			err = r.onLeads(ctx)
		case evTicket:
			r.arrived++
			err = r.onTicket(ctx, r.tickets[e.ticket])
		}
		if err != nil {
			return fmt.Errorf("drill: at minute %.1f: %w", e.at.Minutes(), err)
		}
	}
	r.clock.Set(start.Add(duration))
	r.progress(duration)
	if r.o.Progress != nil {
		fmt.Fprintln(r.o.Progress)
	}
	return nil
}

func (r *run) now() time.Duration { return r.clock.Now().Sub(start) }

func (r *run) progress(at time.Duration) {
	m := int(at / time.Minute)
	if r.o.Progress == nil || m == r.minute {
		return
	}
	r.minute = m
	fmt.Fprintf(r.o.Progress, "\rdrill seed %d: simulated minute %3d of %d, %3d tickets, policy %s",
		r.o.Seed, m, int(duration/time.Minute), r.arrived, r.st.Policy.Revision())
}

// onTicket is the agent: it opens the ticket's workflow and proposes its
// plan at once. A step that needs a lead waits; the rest run.
func (r *run) onTicket(ctx context.Context, t ticket) error {
	rep := r.people[t.Rep]
	eng := r.st.Engine
	if _, _, err := eng.CreateWorkflow(ctx, rep, t.Workflow, t.ID); err != nil {
		return err
	}
	plan := []struct {
		name tool.Name
		args tool.Args
	}{
		{tool.LookupOrder, tool.Args{Order: t.Order}},
		{tool.IssueRefund, tool.Args{Order: t.Order, Amount: t.Amount}},
	}
	if t.Reship {
		plan = append(plan, struct {
			name tool.Name
			args tool.Args
		}{tool.ReshipOrder, tool.Args{Order: t.Order}})
	}
	for _, p := range plan {
		if _, err := eng.Propose(ctx, rep, t.Workflow, p.name, tool.Canonical(p.name, p.args)); err != nil {
			return fmt.Errorf("%s: propose %s: %w", t.Workflow, p.name, err)
		}
	}
	return nil
}

// leadFor is the lead of region whose limit covers amount, first by id.
func (r *run) leadFor(region string, amount money.Cents) (engine.Person, bool) {
	for _, l := range r.leads {
		if l.Region == region && l.ApproveLimit >= amount {
			return l, true
		}
	}
	return engine.Person{}, false
}

// onLeads is the leads' review of the queue: each pending approval is
// approved with probability approveShare, the others wait. After a lead
// acted, the agent resumes the workflow.
func (r *run) onLeads(ctx context.Context) error {
	eng := r.st.Engine
	pending, err := eng.Approvals(ctx, store.ApprovalPending)
	if err != nil {
		return err
	}
	for _, a := range pending {
		lead, ok := r.leadFor(a.RequesterRegion, a.Args.Amount)
		if !ok || r.leadsRNG.Float64() >= approveShare {
			continue
		}
		_, err := eng.Approve(ctx, lead, a.ID, "approved at queue review")
		var refused *engine.ApprovalRefused
		switch {
		case err == nil:
		case errors.As(err, &refused) && refused.Code == string(policy.ApprovalExpired):
			// Too late: the agent's resume asks for a new approval.
		case errors.Is(err, engine.ErrNotPending):
			continue
		default:
			return fmt.Errorf("%s approves %s: %w", lead.ID, a.ID, err)
		}
		if _, err := eng.Resume(ctx, r.people[a.Requester], a.Workflow); err != nil {
			return fmt.Errorf("resume %s: %w", a.Workflow, err)
		}
	}
	return nil
}

// onMonitor runs the monitor; its first invariant alert schedules
// containment.
func (r *run) onMonitor(ctx context.Context) error {
	alerts, err := r.st.Monitor.Check(ctx)
	if err != nil {
		return err
	}
	for _, a := range alerts {
		al := Alert{Minute: r.minutes(r.now()), Kind: a.Kind, Refunds: len(a.Steps), Message: a.Message}
		for _, v := range a.Steps {
			al.Total += v.Amount
		}
		r.report.Alerts = append(r.report.Alerts, al)
		if a.Kind == monitor.KindInvariant && !r.alert.ok {
			r.alert = mark{r.now(), true}
			r.event(EventAlert, fmt.Sprintf("the monitor: %d refund(s) above %s executed without a used approval, %s", len(a.Steps), autoLimit, al.Total))
			r.q.push(event{at: r.now() + containDelay, kind: evContain})
		}
	}
	return nil
}

// onRelease releases p2 by break-glass.
func (r *run) onRelease(ctx context.Context) error {
	if err := r.activate(ctx, "p2"); err != nil {
		return err
	}
	r.release = mark{r.now(), true}
	r.event(EventDeploy, "p2 activated by "+operatorID+" by break-glass, approved by "+approverID+", without the gate")
	return nil
}

// onContain switches issue_refund off and raises the credential epoch.
func (r *run) onContain(ctx context.Context) error {
	ops := r.people[operatorID]
	if err := r.st.Engine.SetSwitch(ctx, ops, tool.IssueRefund, false, "containment: refunds over the auto limit ran without approval after p2"); err != nil {
		return err
	}
	from := r.st.Authority.Epoch()
	to, err := r.st.Authority.Raise(ctx)
	if err != nil {
		return err
	}
	if err := r.st.Engine.RecordEvent(ctx, audit.Record{Kind: audit.KindEpoch, Actor: ops.ID,
		Detail: map[string]any{"epoch": to}}); err != nil {
		return err
	}
	r.contain = mark{r.now(), true}
	r.event(EventContain, fmt.Sprintf("issue_refund switched off; credential epoch %d -> %d", from, to))
	fixAt := max(r.release.at+fixAfterRelease, r.now()+fixAfterContain)
	r.q.push(event{at: fixAt, kind: evFix})
	return nil
}

// onFix releases p3 and notes the workflows paused at that moment.
func (r *run) onFix(ctx context.Context) error {
	if err := r.activate(ctx, "p3"); err != nil {
		return err
	}
	paused, err := r.workflows(store.WorkflowPaused)
	if err != nil {
		return err
	}
	r.pausedAtFix = paused
	r.event(EventFix, fmt.Sprintf("p3 activated (the gate passes p3 as shipped; the drill's copy by break-glass); %d workflow(s) paused", len(paused)))
	r.q.push(event{at: r.now() + reenableAfterFix, kind: evReenable})
	return nil
}

// onReenable switches issue_refund on and resumes every paused workflow.
func (r *run) onReenable(ctx context.Context) error {
	ops := r.people[operatorID]
	if err := r.st.Engine.SetSwitch(ctx, ops, tool.IssueRefund, true, "re-enabled under p3 after the fix"); err != nil {
		return err
	}
	paused, err := r.workflows(store.WorkflowPaused)
	if err != nil {
		return err
	}
	for _, id := range paused {
		if _, err := r.st.Engine.Resume(ctx, ops, id); err != nil {
			return fmt.Errorf("resume %s: %w", id, err)
		}
	}
	r.event(EventReenable, fmt.Sprintf("issue_refund switched on; %d paused workflow(s) resumed under p3", len(paused)))
	return nil
}

// workflows lists the ids of the workflows in status s, in id order.
func (r *run) workflows(s store.WorkflowStatus) ([]string, error) {
	var ids []string
	err := r.st.Store.View(func(tx *store.Tx) error {
		ws, err := tx.Workflows(func(w store.Workflow) bool { return w.Status == s })
		for _, w := range ws {
			ids = append(ids, w.ID)
		}
		return err
	})
	slices.Sort(ids)
	return ids, err
}

// minutes is an offset from the start as minutes after the release, to a
// tenth of a minute.
func (r *run) minutes(at time.Duration) float64 {
	return tenths((at - releaseAt).Minutes())
}

func (r *run) event(name, detail string) {
	r.report.Timeline = append(r.report.Timeline, Event{Name: name, Minute: r.minutes(r.now()), At: r.clock.Now(), Detail: detail})
}

// The kinds of event, in the order they run when they fall on the same
// instant: the operator's actions, then the monitor, the leads and the
// tickets.
type eventKind int

const (
	evRelease eventKind = iota
	evContain
	evFix
	evReenable
	evMonitor
	evLeads
	evTicket
)

type event struct {
	at     time.Duration
	kind   eventKind
	ticket int
}

func (a event) compare(b event) int {
	switch {
	case a.at != b.at:
		return cmp.Compare(a.at, b.at)
	case a.kind != b.kind:
		return cmp.Compare(a.kind, b.kind)
	}
	return cmp.Compare(a.ticket, b.ticket)
}

// queue is the events still to come, in order.
type queue []event

func (q *queue) push(e event) {
	i, _ := slices.BinarySearchFunc(*q, e, event.compare)
	*q = slices.Insert(*q, i, e)
}

func (q *queue) pop() event {
	e := (*q)[0]
	*q = (*q)[1:]
	return e
}
