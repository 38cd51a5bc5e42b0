package stack

import (
	"path/filepath"

	"github.com/countersign/countersign/executor/audit"
)

// AuditKeyFile is the file in DataDir that holds the key signing the
// audit's checkpoints when Options.AuditKeyFile names none.
const AuditKeyFile = "audit-key.pem"

// openAuditSigner loads the key that signs the audit's checkpoints and
// registers its public half in the store (GET
// /.well-known/countersign-audit-keys). A key file the operator named
// must exist; without one the sidecar keeps its own in DataDir, made on
// the first start, as it keeps its token signing keys: a sidecar starts
// without a new mandatory flag, and an operator who wants the key apart
// from the state it vouches for names a file on another volume.
func (st *Stack) openAuditSigner(o Options) (audit.Signer, error) {
	if o.AuditKeyFile != "" {
		key, err := audit.LoadKey(o.AuditKeyFile)
		if err != nil {
			return audit.Signer{}, err
		}
		s := audit.NewSigner(key)
		o.Logger.Info("audit checkpoints are signed with the key of --audit-key-file", "kid", s.KeyID(), "file", o.AuditKeyFile)
		return s, audit.RegisterKey(st.Store, s)
	}
	path := filepath.Join(o.DataDir, AuditKeyFile)
	key, created, err := audit.LoadOrCreateKey(path)
	if err != nil {
		return audit.Signer{}, err
	}
	s := audit.NewSigner(key)
	msg := "audit checkpoints are signed with the key in the data directory; name one kept apart from the state with --audit-key-file"
	if created {
		msg = "created the key that signs audit checkpoints in the data directory; name one kept apart from the state with --audit-key-file"
	}
	o.Logger.Info(msg, "kid", s.KeyID(), "file", path)
	return s, audit.RegisterKey(st.Store, s)
}
