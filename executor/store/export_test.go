package store

// OverwriteDecision replaces the stored bytes of decision seq, as a store
// written by an older version, or a damaged one, holds them. Test export.
func (t *Tx) OverwriteDecision(seq uint64, raw []byte) error {
	return t.bucket(bDecisions).Put(u64(seq), raw)
}
