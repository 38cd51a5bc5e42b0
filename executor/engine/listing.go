package engine

import (
	"context"

	"github.com/countersign/countersign/executor/store"
)

// Workflows returns a page of the workflows p may read, in the order they
// were created: a rep's own, read along the index of their workflows (f's
// user is theirs, whatever f says); every workflow, or f's user's, for a
// lead or an operator.
func (e *Engine) Workflows(ctx context.Context, p Person, f store.WorkflowFilter, limit int) (store.WorkflowPage, error) {
	if p.Role != RoleLead && p.Role != RoleOperator {
		f.User = p.ID
	}
	// A step answered before its record was durable (recordLater) shows
	// in its workflow's status once it is: read after those writes.
	e.locks.settleAll()
	var page store.WorkflowPage
	err := e.db.View(func(tx *store.Tx) (err error) {
		page, err = tx.WorkflowPage(f, limit)
		return err
	})
	return page, err
}
