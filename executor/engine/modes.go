package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign/executor/audit"
	"github.com/countersign/countersign/executor/breaker"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

// RuleApprovalOnly is the rule of a call the policy allowed that waits for
// a lead because its tool is in approval_only (set by an operator, by the
// bundle's default, or by a tripped breaker).
const RuleApprovalOnly = "mode-approval-only"

// ToolMode is where one tool stands on the ramp of autonomy.
type ToolMode struct {
	Tool tool.Name
	// Mode is what applies to an agent version whose breaker is not
	// tripped: the operator's setting, else the bundle's default.
	Mode policy.Mode
	// Default is the active bundle's default for the tool.
	Default policy.Mode
	// Set is the operator's last setting; nil when there is none.
	Set *store.ModeSetting
	// Breakers are the tool's breakers that hold failures or a trip, one
	// per agent version; a tripped one runs the tool in approval_only for
	// its version.
	Breakers []store.Breaker
}

// autonomy is the active bundle's modes and breaker, or the defaults (all
// auto) when no bundle is active.
func (e *Engine) autonomy() policy.Autonomy {
	a, err := e.policy.Autonomy()
	if err != nil {
		return policy.Autonomy{Breaker: policy.DefaultBreaker}
	}
	return a
}

// toolMode reads tool name's mode, setting and breakers in tx.
func (e *Engine) toolMode(tx *store.Tx, name tool.Name) (ToolMode, error) {
	m := ToolMode{Tool: name, Default: e.autonomy().Mode(name)}
	m.Mode = m.Default
	set, ok, err := tx.Mode(string(name))
	if err != nil {
		return m, err
	}
	if ok {
		m.Set, m.Mode = &set, policy.Mode(set.Mode)
	}
	m.Breakers, err = tx.Breakers(string(name))
	return m, err
}

// modeFor is the mode a call of name by workflow w runs under, read in the
// transaction that acts on it: an auto tool is approval_only for an agent
// version whose breaker tripped.
func (e *Engine) modeFor(tx *store.Tx, w store.Workflow, name tool.Name) (policy.Mode, error) {
	mode := e.autonomy().Mode(name)
	set, ok, err := tx.Mode(string(name))
	if err != nil {
		return mode, err
	}
	if ok {
		mode = policy.Mode(set.Mode)
	}
	if mode != policy.ModeAuto || !e.controls.Breaker {
		return mode, nil
	}
	b, err := tx.Breaker(string(name), w.AgentVersion)
	if err == nil && b.Tripped() {
		mode = policy.ModeApprovalOnly
	}
	return mode, err
}

// Modes reports every tool's mode and breakers.
func (e *Engine) Modes(ctx context.Context) ([]ToolMode, error) {
	var out []ToolMode
	err := e.db.View(func(tx *store.Tx) error {
		for _, spec := range tool.All() {
			m, err := e.toolMode(tx, spec.Name)
			if err != nil {
				return err
			}
			out = append(out, m)
		}
		return nil
	})
	return out, err
}

// SetMode puts a tool in a mode, with the operator's reason in the audit
// record, and resets the tool's breakers for every agent version: the
// operator has looked at what tripped them. It answers the tool's mode as
// it now stands.
func (e *Engine) SetMode(ctx context.Context, by Person, name tool.Name, mode policy.Mode, reason string) (ToolMode, error) {
	if _, ok := tool.Lookup(name); !ok {
		return ToolMode{}, fmt.Errorf("mode of %q: %w", name, tool.ErrUnknownTool)
	}
	if !mode.Valid() {
		return ToolMode{}, &InvalidError{Field: "mode", Problem: "must be shadow, approval_only or auto"}
	}
	if err := checkText("reason", reason); err != nil {
		return ToolMode{}, err
	}
	m, err := batch(e.db, func(tx *store.Tx) (ToolMode, error) {
		reset, err := tx.ResetBreakers(string(name))
		if err != nil {
			return ToolMode{}, err
		}
		detail := map[string]any{"mode": string(mode)}
		if reason != "" {
			detail["reason"] = reason
		}
		if len(reset) > 0 {
			var versions []string
			for _, b := range reset {
				versions = append(versions, b.AgentVersion)
			}
			detail["breakers_reset"] = versions
		}
		if err := e.auditTx(tx, audit.Record{Kind: audit.KindMode, Actor: by.ID, Tool: string(name), Detail: detail}); err != nil {
			return ToolMode{}, err
		}
		if err := tx.SetMode(string(name), store.ModeSetting{Mode: string(mode), By: by.ID, Reason: reason, At: e.clock.Now()}); err != nil {
			return ToolMode{}, err
		}
		return e.toolMode(tx, name)
	})
	if err == nil {
		e.log.Info("mode set", "tool", name, "mode", mode, "by", by.ID, "reason", reason)
	}
	return m, err
}

// countFailure records a semantic failure (what) of a call of name in
// workflow w at now, in tx, and returns the breaker if this failure
// tripped it. The trip is audited in the same transaction; the caller
// tells the observer once it is durable (e.tripped).
func (e *Engine) countFailure(tx *store.Tx, w store.Workflow, name tool.Name, what string, now time.Time) (*store.Breaker, error) {
	if !e.controls.Breaker || w.AgentVersion == "" {
		// The breaker is the agent version's ramp: an agent earns and
		// loses autonomy under the version it declares. One that declares
		// none is held by the policy and the approvals alone, so that a
		// client's run of bad requests does not change the contract's
		// answers for everyone without a version.
		return nil, nil
	}
	lim := e.autonomy().Breaker
	b, err := tx.Breaker(string(name), w.AgentVersion)
	if err != nil {
		return nil, err
	}
	var tripped bool
	b.State, tripped = b.Record(now, breaker.Limits{Window: lim.Window, MaxFailures: lim.MaxFailures}, what)
	if err := tx.PutBreaker(b); err != nil || !tripped {
		return nil, err
	}
	err = e.auditTx(tx, audit.Record{Kind: audit.KindBreaker, Actor: audit.ActorEngine, Workflow: w.ID, Tool: string(name),
		Detail: map[string]any{"agent_version": b.AgentVersion, "failures": b.Trip.Failures,
			"window_seconds": b.Trip.WindowSeconds, "last": what, "mode": string(policy.ModeApprovalOnly)}})
	return &b, err
}

// tripped raises the alert of a trip that is durable.
func (e *Engine) tripped(b *store.Breaker) {
	if b == nil {
		return
	}
	e.obs.BreakerTripped(*b)
	e.log.Warn("breaker tripped: the tool runs in approval_only for this agent version until an operator sets its mode",
		"tool", b.Tool, "agent_version", b.AgentVersion, "failures", b.Trip.Failures,
		"window_seconds", b.Trip.WindowSeconds, "last", b.Trip.Last)
}

// maxRejectionReason bounds the reason kept with a schema rejection: the
// message names the field, never needs the caller's whole input.
const maxRejectionReason = 256

// schemaFailure records a proposal refused by the tool's schema (for the
// control-effectiveness report) and counts it against the breaker of its
// workflow's agent version (for a workflow the proposal would have opened,
// the version it declares). A proposal to a workflow the rep cannot act
// in, or of no known tool, counts nowhere.
func (e *Engine) schemaFailure(p Person, wfID string, open *opening, name tool.Name, cause error) {
	if errors.Is(cause, tool.ErrUnknownTool) {
		return
	}
	b, err := batch(e.db, func(tx *store.Tx) (*store.Breaker, error) {
		w, err := e.ownWorkflow(tx, p, wfID)
		if open != nil {
			// A call that would have opened the workflow counts under the
			// agent version it declared, as if opened apart first.
			w, _, err = e.opened(tx, p, open)
		}
		if err != nil {
			return nil, nil
		}
		now := e.clock.Now()
		reason := cause.Error()
		if len(reason) > maxRejectionReason {
			reason = reason[:maxRejectionReason]
		}
		if err := tx.AppendRejection(store.Rejection{At: now, Workflow: wfID, Tool: name, AgentVersion: w.AgentVersion, Reason: reason}); err != nil {
			return nil, err
		}
		return e.countFailure(tx, w, name, "schema_rejected", now)
	})
	if err != nil {
		e.log.Error("a schema rejection was not recorded", "workflow", wfID, "tool", name, "err", err)
		return
	}
	e.tripped(b)
}

// shadow ends a step decided in shadow mode: the decision that would have
// applied stays on it, nothing is dispatched or spent, and no approval is
// requested (one it had is voided).
func (e *Engine) shadow(tx *store.Tx, r reservation, now time.Time) (reservation, error) {
	r.step.Status, r.step.Finished = store.StepShadowed, now
	r.step.Note = fmt.Sprintf("shadow mode: the policy answered %s (%s); nothing was dispatched", r.step.Decision, r.step.Rule)
	void, err := e.voidApproval(tx, r.step.Approval)
	if err != nil {
		return r, err
	}
	if void.ID != "" {
		r.changed = append(r.changed, void)
	}
	if err := e.auditTx(tx, stepRecord(audit.KindResult, audit.ActorEngine, r.step,
		map[string]any{"status": string(r.step.Status), "note": r.step.Note})); err != nil {
		return r, err
	}
	return r, e.putStep(tx, r.step)
}
