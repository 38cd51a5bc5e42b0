package sim

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing/fstest"

	"github.com/countersign/countersign/bundles"
	"github.com/countersign/countersign/bundles/loosen"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/store"
)

// releaseSeeds: one seed in this many has its operators release bundles
// (in the others the release event does nothing), so that most seeds
// search the workload under the simulation's p1 alone.
const releaseSeeds = 3

// maxReleases bounds the releases of one seed.
const maxReleases = 2

// simBundles are the bundles of the simulation, each p1 with the
// simulation's caps and one change.
type simBundles struct {
	// base is what every world starts with (p1-sim).
	base *policy.Bundle
	// tight lowers the auto limit from $50 to $40: a pure tightening,
	// live on one operator's word.
	tight *policy.Bundle
	// spareBen exempts rep-ben from R7 (loosen.SpareBen): a new allow,
	// which only one operator ever asks for here, so it must never go
	// live (the TwoPersonLoosening control; InvApproval breaks if it does).
	spareBen *policy.Bundle
	// repApproves lets rep-ana approve, before any other approver rule:
	// two operators activate it, and the approval role floor must still
	// refuse her (the ApprovalRoleFloor control; InvApprover).
	repApproves *policy.Bundle
	// x100 has every money limit a hundred times too large (as p2):
	// released by break glass by two operators, it lets refunds above the
	// reps' $500 ceiling through the policy, and the ceiling in the actor
	// token must stop them at the ledger (the DownstreamCeiling control;
	// InvCeiling). The steps it decided are held to no cap or auto limit.
	x100 *policy.Bundle
}

func (b simBundles) all() []*policy.Bundle {
	return []*policy.Bundle{b.base, b.tight, b.spareBen, b.repApproves, b.x100}
}

func (b simBundles) byDigest(digest string) *policy.Bundle {
	for _, x := range b.all() {
		if x.Digest() == digest {
			return x
		}
	}
	return nil
}

// loadBundles builds the simulation's bundles from the embedded p1.
func loadBundles() (simBundles, error) {
	src, err := bundles.Open("p1")
	if err != nil {
		return simBundles{}, fmt.Errorf("sim: %w", err)
	}
	rego := fstest.MapFS{}
	var data []byte
	err = fs.WalkDir(src, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(src, path)
		if path == "data.json" {
			data = b
		}
		rego[path] = &fstest.MapFile{Data: b, Mode: 0o644}
		return err
	})
	if err != nil {
		return simBundles{}, fmt.Errorf("sim: bundle p1: %w", err)
	}
	p1, err := policy.LoadFS(src)
	if err != nil {
		return simBundles{}, fmt.Errorf("sim: %w", err)
	}
	lim := p1.Limits()
	caps := []policy.LimitChange{{Name: "rep_daily", From: int64(lim.RepDaily), To: simRepDaily},
		{Name: "agent_hourly", From: int64(lim.AgentHourly), To: simAgentHourly}}
	build := func(revision string, edits map[string]func(string) string, limits map[string]int64, changes []policy.LimitChange) (*policy.Bundle, error) {
		files := fstest.MapFS{}
		for path, f := range rego {
			body := string(f.Data)
			if edit := edits[path]; edit != nil {
				if body = edit(body); body == string(f.Data) {
					return nil, fmt.Errorf("sim: bundle %s: the edit of %s changed nothing: p1 changed, update bundles.go", revision, path)
				}
			}
			files[path] = &fstest.MapFile{Data: []byte(body), Mode: 0o644}
		}
		d, err := withCaps(data, limits)
		if err != nil {
			return nil, fmt.Errorf("sim: bundle %s: %w", revision, err)
		}
		fsys, err := policy.Source(files, d, revision, changes)
		if err != nil {
			return nil, fmt.Errorf("sim: bundle %s: %w", revision, err)
		}
		b, err := policy.LoadFS(fsys)
		if err != nil {
			return nil, fmt.Errorf("sim: bundle %s: %w", revision, err)
		}
		return b, nil
	}
	var out simBundles
	x100 := map[string]int64{}
	for name, v := range map[string]int64{"refund_auto": int64(lim.RefundAuto), "refund_max": int64(lim.RefundMax),
		"reship_approval_value": int64(lim.ReshipApprovalValue), "rep_daily": simRepDaily, "agent_hourly": simAgentHourly} {
		x100[name] = 100 * v
	}
	for _, b := range []struct {
		to      **policy.Bundle
		rev     string
		edits   map[string]func(string) string
		limits  map[string]int64
		changes []policy.LimitChange
	}{
		{&out.base, "p1-sim", nil, nil, caps},
		{&out.tight, "p1-sim-tight", nil, map[string]int64{"refund_auto": 4000},
			[]policy.LimitChange{{Name: "refund_auto", From: int64(lim.RefundAuto), To: 4000}}},
		{&out.spareBen, "p1-sim-spare-ben", map[string]func(string) string{"call/call.rego": loosen.SpareBen}, nil, nil},
		{&out.repApproves, "p1-sim-rep-ana-approves", map[string]func(string) string{"approver/approver.rego": repApproves}, nil, nil},
		{&out.x100, "p1-sim-x100", nil, x100, nil},
	} {
		if *b.to, err = build(b.rev, b.edits, b.limits, b.changes); err != nil {
			return simBundles{}, err
		}
	}
	return out, nil
}

// repApproves edits approver.rego: rep-ana's approvals are allowed before
// any other approver rule (the demo's approval-floor bundle).
func repApproves(src string) string {
	const first = `verdict := refused("requester_cannot_approve") if {`
	return strings.Replace(src, first, `verdict := {"allowed": true} if {
	input.approver.id == "rep-ana"
} else := refused("requester_cannot_approve") if {`, 1)
}

// releaseState is what the harness knows of the operators' releases.
type releaseState struct {
	done int
}

// release has the operators change the active bundle, in the seeds that
// release bundles: from the simulation's p1, one operator tightens it,
// one asks alone for the loosening spareBen, two activate repApproves, or
// two break the glass for x100; from any other, one operator rolls back
// to p1-sim, with a second when the gate asks for one.
//
// They go through the policy engine's Activate, after following the
// store's active bundle, as release.Service does, with what decides
// whether a bundle goes live: the gate and the two-person rule. What
// release.Service adds for the second operator to read, the replay of
// recent decisions and the review of what the bundle newly allows, is
// left out: it takes about half a second per activation and decides
// nothing.
func (w *world) release(ctx context.Context) error {
	if !w.releases || w.bundle.done >= maxReleases {
		return nil
	}
	w.bundle.done++
	sc := w.pick()
	if err := sc.rel.Follow(ctx); err != nil {
		return w.fatal(err)
	}
	b := w.shared.bundles
	activate := func(x *policy.Bundle, a policy.Activation, what string) error {
		_, err := sc.pol.Activate(ctx, x, a)
		w.tracef("%s: %s %s: %s", sc.name, what, x.Revision(), releaseClass(err))
		return err
	}
	var err error
	switch active := sc.pol.Active(); {
	case active.Digest() != b.base.Digest():
		err = activate(b.base, policy.Activation{By: "ops-ida", Rollback: true}, "ops-ida rolls back to")
		if errors.Is(err, policy.ErrAwaitingSecondOperator) {
			err = activate(b.base, policy.Activation{By: "ops-jon", Proposer: "ops-ida", Rollback: true}, "ops-jon approves the rollback to")
		}
	default:
		switch w.rng.IntN(4) {
		case 0:
			err = activate(b.tight, policy.Activation{By: "ops-ida"}, "ops-ida activates")
		case 1:
			err = activate(b.spareBen, policy.Activation{By: "ops-ida"}, "ops-ida alone activates")
		case 2:
			err = activate(b.repApproves, policy.Activation{By: "ops-ida"}, "ops-ida proposes")
			if errors.Is(err, policy.ErrAwaitingSecondOperator) {
				err = activate(b.repApproves, policy.Activation{By: "ops-jon", Proposer: "ops-ida"}, "ops-jon approves")
			}
		default:
			err = activate(b.x100, policy.Activation{By: "ops-jon", Proposer: "ops-ida", BreakGlass: true, Reason: "sim: break glass"},
				"ops-ida and ops-jon break the glass for")
		}
	}
	return w.releaseDone(err)
}

// releaseDone passes on what the harness cannot go on from: a bundle
// left awaiting a second operator or refused by the gate is an ordinary
// outcome.
func (w *world) releaseDone(err error) error {
	var gate *policy.GateError
	if err == nil || errors.Is(err, policy.ErrAwaitingSecondOperator) || errors.As(err, &gate) {
		return nil
	}
	return w.fatal(err)
}

// releaseClass names a release's outcome for the trace.
func releaseClass(err error) string {
	var gate *policy.GateError
	switch {
	case err == nil:
		return "live"
	case errors.Is(err, policy.ErrAwaitingSecondOperator):
		return "awaits a second operator"
	case errors.As(err, &gate):
		return "refused by the gate"
	}
	return errClass(err)
}

// repApprovesEvent has rep-ana approve a pending approval (her own
// request or another rep's), as a rep whose bundle lets her might; the
// rep's agent then mostly resumes the workflow.
func (w *world) repApprovesEvent(ctx context.Context) error {
	sc := w.pick()
	pending, err := sc.eng.Approvals(ctx, store.ApprovalPending)
	if err != nil {
		return w.fatal(err)
	}
	if len(pending) == 0 {
		return nil
	}
	a := pending[w.rng.IntN(len(pending))]
	_, err = sc.eng.Approve(ctx, person("rep-ana"), a.ID, "sim")
	w.tracef("%s: rep-ana approves %s (%s/%d): %s", sc.name, a.ID, a.Workflow, a.N, errClass(err))
	if err := ignorable(err); err != nil {
		return err
	}
	if w.rng.IntN(10) < 7 {
		return w.resume(ctx, a.Workflow)
	}
	return nil
}
