package store

// OverwriteDecision replaces the stored bytes of decision seq, as a store
// written by an older version, or a damaged one, holds them. Test export.
func (t *Tx) OverwriteDecision(seq uint64, raw []byte) error {
	return t.bucket(bDecisions).Put(u64(seq), raw)
}

// SchemaVersion is the version of the last PostgreSQL migration. Test
// export.
var SchemaVersion = len(migrations)

// Retries counts the write attempts a PostgreSQL store ran again after a
// conflict; 0 on bbolt. Test export.
func Retries(db *DB) uint64 {
	if s, ok := db.kv.(*pgStore); ok {
		return s.retried.Load()
	}
	return 0
}
