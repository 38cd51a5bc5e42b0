package main

import (
	"errors"
	"fmt"

	"github.com/countersign/countersign/executor/audit"
)

// checkAudit says what is wrong with the audit checkpoint flags, every
// problem at once (nil when none): serve and config check refuse them
// before anything starts.
func (f serveFlags) checkAudit() error {
	var problems []error
	if f.auditCheckpoint.Every <= 0 {
		problems = append(problems, fmt.Errorf("--audit-checkpoint-every %d must be over zero (default %d records)",
			f.auditCheckpoint.Every, audit.DefaultCheckpointEvery))
	}
	if f.auditCheckpoint.Interval <= 0 {
		problems = append(problems, fmt.Errorf("--audit-checkpoint-interval %s must be over zero (default %s)",
			f.auditCheckpoint.Interval, audit.DefaultCheckpointInterval))
	}
	if f.auditCheckpointURL != "" && !isBaseURL(f.auditCheckpointURL) { // not repeated: it may hold a credential
		problems = append(problems, errors.New("--audit-checkpoint-url must be an absolute http(s) URL"))
	}
	if f.auditKeyFile != "" {
		if _, err := audit.LoadKey(f.auditKeyFile); err != nil {
			problems = append(problems, fmt.Errorf("--audit-key-file: %w", err))
		}
	}
	return errors.Join(problems...)
}
