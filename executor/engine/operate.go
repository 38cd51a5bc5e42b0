package engine

import (
	"context"
	"fmt"

	"github.com/countersign/countersign/executor/audit"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

// Switches reports every tool's switch.
func (e *Engine) Switches(ctx context.Context) (map[tool.Name]bool, error) {
	out := map[tool.Name]bool{}
	err := e.db.View(func(tx *store.Tx) error {
		for _, s := range tool.All() {
			out[s.Name] = tx.Switch(string(s.Name))
		}
		return nil
	})
	return out, err
}

// SetSwitch turns a tool on or off, with the operator's reason (may be
// empty) in the audit record. Off stops every workflow at its next step of
// that tool, at the moment of effect.
func (e *Engine) SetSwitch(ctx context.Context, by Person, name tool.Name, enabled bool, reason string) error {
	if _, ok := tool.Lookup(name); !ok {
		return fmt.Errorf("switch %q: %w", name, tool.ErrUnknownTool)
	}
	if err := checkText("reason", reason); err != nil {
		return err
	}
	detail := map[string]any{"enabled": enabled}
	if reason != "" {
		detail["reason"] = reason
	}
	err := e.db.Update(func(tx *store.Tx) error {
		if err := e.auditTx(tx, audit.Record{Kind: audit.KindSwitch, Actor: by.ID, Tool: string(name),
			Detail: detail}); err != nil {
			return err
		}
		return tx.SetSwitch(string(name), enabled)
	})
	if err == nil {
		e.log.Info("switch set", "tool", name, "enabled", enabled, "by", by.ID, "reason", reason)
	}
	return err
}

// Decisions reads one page of the decision log: the first limit decisions
// f selects, oldest first (store.Tx.EachDecision says how Since and Until
// are found).
func (e *Engine) Decisions(ctx context.Context, f store.DecisionFilter, limit int) (store.DecisionPage, error) {
	var p store.DecisionPage
	err := e.db.View(func(tx *store.Tx) (err error) {
		p, err = tx.DecisionPage(f, limit)
		return err
	})
	return p, err
}

// Ping reports whether the store answers.
func (e *Engine) Ping() error {
	return e.db.View(func(*store.Tx) error { return nil })
}
