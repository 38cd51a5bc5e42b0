package store

// OverwriteWorkflow replaces the stored bytes of workflow id, as a damaged
// store holds them: a test that lists past it shows it was never read.
// Test export.
func (t *Tx) OverwriteWorkflow(id string, raw []byte) error {
	return t.bucket(bWorkflows).Put([]byte(id), raw)
}
