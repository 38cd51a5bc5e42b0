package store

import "fmt"

// metaReconciliation, in the meta bucket, is the report of the latest
// reconciliation as its job encoded it: kept in the store so that every
// sidecar sharing it answers the same latest report, and a restart keeps it.
var metaReconciliation = []byte("latest_reconciliation")

// PutReconciliation keeps report as the latest reconciliation's.
func (t *Tx) PutReconciliation(report []byte) error {
	if err := t.bucket(bMeta).Put(metaReconciliation, report); err != nil {
		return fmt.Errorf("put the latest reconciliation: %w", err)
	}
	return nil
}

// Reconciliation returns the latest reconciliation's report as kept, or
// ErrNotFound before the first.
func (t *Tx) Reconciliation() ([]byte, error) {
	v := t.bucket(bMeta).Get(metaReconciliation)
	if v == nil {
		return nil, fmt.Errorf("latest reconciliation: %w", ErrNotFound)
	}
	return append([]byte(nil), v...), nil
}
