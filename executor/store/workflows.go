package store

import "fmt"

// Workflow returns the workflow with the given id. Key: the id.
func (t *Tx) Workflow(id string) (Workflow, error) {
	var w Workflow
	if err := t.getJSON(bWorkflows, []byte(id), &w); err != nil {
		return Workflow{}, fmt.Errorf("workflow %q: %w", id, err)
	}
	return w, nil
}

// CreateWorkflow stores a new workflow; ErrExists if the id is taken. It
// numbers the workflow in the order of creation and indexes it by user
// (WorkflowPage).
func (t *Tx) CreateWorkflow(w Workflow) error {
	if t.bucket(bWorkflows).Get([]byte(w.ID)) != nil {
		return fmt.Errorf("workflow %q: %w", w.ID, ErrExists)
	}
	if err := t.indexWorkflow(w); err != nil {
		return err
	}
	return t.PutWorkflow(w)
}

// PutWorkflow stores w, replacing any earlier version. A new workflow is
// stored with CreateWorkflow, which indexes it.
func (t *Tx) PutWorkflow(w Workflow) error {
	return t.putJSON(bWorkflows, []byte(w.ID), w)
}

// Workflows returns every workflow for which keep returns true, in id order.
func (t *Tx) Workflows(keep func(Workflow) bool) ([]Workflow, error) {
	var out []Workflow
	err := t.bucket(bWorkflows).ForEach(func(k, v []byte) error {
		var w Workflow
		if err := decodeJSON(bWorkflows, k, v, &w); err != nil {
			return err
		}
		if keep == nil || keep(w) {
			out = append(out, w)
		}
		return nil
	})
	return out, err
}
