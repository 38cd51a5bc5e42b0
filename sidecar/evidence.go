package sidecar

import (
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/evidence"
	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/sidecar/client"
)

// evidence answers GET /v1/workflows/{id}/steps/{n}/evidence: to whoever
// may read the workflow (engine.Workflow: a rep their own, another rep's
// is not_found as an unknown id is; leads and operators any).
func (s *Server) evidence(c echo.Context) error {
	n, err := stepNumber(c)
	if err != nil {
		return err
	}
	id := c.Param("id")
	if _, _, err := s.opts.Engine.Workflow(c.Request().Context(), person(c), id); err != nil {
		return err
	}
	ev, err := evidence.Gather(s.opts.Store, id, n)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, newEvidence(ev))
}

func newEvidence(ev evidence.Evidence) client.Evidence {
	w, st := ev.Workflow, ev.Step
	out := client.Evidence{
		Workflow: w.ID, N: st.N,
		Asked: client.EvidenceAsked{Rep: w.User, Ticket: w.Ticket, AgentVersion: w.AgentVersion, Opened: w.Created},
		Call: client.EvidenceCall{Tool: string(st.Tool), Args: newArgsView(st.Tool, st.Args), Status: string(st.Status),
			Proposed: st.Created, AgentReason: st.AgentReason, CallHash: engine.Binding(w.ID, st.Tool, st.Args)},
		Records:      make([]client.EvidenceRecord, 0, len(ev.Records)),
		Verification: newVerdict(ev),
	}
	if d := ev.Decision; d != nil {
		out.Policy = &client.EvidencePolicy{DecisionID: d.ID, At: d.At, Decision: d.Decision, Rule: d.Rule,
			Revision: d.Revision, Digest: d.Digest, Mode: d.Mode, Input: d.Input, Decisions: ev.Decisions}
	}
	if a := ev.Approval; a != nil {
		out.Approval = &client.EvidenceApproval{ID: a.ID, Status: string(a.Status), Requester: a.Requester, Approver: a.Approver,
			Comment: a.Comment, CallHash: a.CallHash, Retroactive: a.Retroactive, Requested: a.Created}
		if !a.Decided.IsZero() {
			out.Approval.Decided = &a.Decided
		}
	}
	if e := ev.Effect; e != nil {
		out.Asked.Agent = e.Agent
		out.Effect = &client.EvidenceEffect{Entry: e.Entry, Amount: money.Cents(e.Amount), Result: e.Result}
	}
	for _, r := range ev.Records {
		out.Records = append(out.Records, client.EvidenceRecord{Position: r.Position, ID: r.ID, At: r.At,
			Kind: string(r.Kind), Actor: r.Actor, Prev: r.Prev, Hash: r.Hash})
	}
	return out
}

// newVerdict says whether the step's records are proven, and how far.
func newVerdict(ev evidence.Evidence) client.EvidenceVerification {
	v := client.EvidenceVerification{OK: ev.Proven(), Records: ev.Chain.Records, Pending: ev.Pending}
	if b := ev.Chain.Broken; b != nil {
		v.Broken = &client.AuditBreak{Index: b.Index, ID: b.ID, Reason: b.Reason}
	}
	if len(ev.Records) > 0 {
		last := ev.Records[len(ev.Records)-1].Position
		v.Through = &last
	}
	if ev.Checkpoint != nil {
		cp := newCheckpoint(*ev.Checkpoint)
		v.Checkpoint, v.Anchored = &cp, ev.Anchored()
	}
	switch {
	case len(ev.Records) == 0 && ev.Pending == 0:
		v.Text = "no audit record covers this step"
	case ev.Pending > 0:
		v.Text = fmt.Sprintf("%d of the step's audit records wait to be chained (a fleet's sequencer chains them within a second): ask again", ev.Pending)
	case v.OK && v.Broken == nil:
		v.Text = fmt.Sprintf("the chain verifies from its first record through position %d, the last of the step's %d records, and every hash recomputes", *v.Through, len(ev.Records))
	case v.OK:
		v.Text = fmt.Sprintf("the chain verifies through position %d, the last of the step's %d records; it breaks later, at position %d: %s", *v.Through, len(ev.Records), v.Broken.Index, v.Broken.Reason)
	default:
		v.Text = fmt.Sprintf("the chain breaks at position %d, at or before the step's records (through %d): %s", v.Broken.Index, *v.Through, v.Broken.Reason)
	}
	switch {
	case !v.OK || len(ev.Records) == 0:
	case v.Anchored:
		v.Text += fmt.Sprintf("; the signed checkpoint at position %d (key %s) covers them", v.Checkpoint.Position, v.Checkpoint.Kid)
	case v.Checkpoint != nil:
		v.Text += fmt.Sprintf("; the checkpoint at position %d that would cover them does not match the chain or its signature", v.Checkpoint.Position)
	default:
		v.Text += "; no signed checkpoint covers them yet (one is due within the checkpoint interval)"
	}
	return v
}
