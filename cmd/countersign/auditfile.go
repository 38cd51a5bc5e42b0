package main

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/countersign/countersign/executor/audit"
	"github.com/countersign/countersign/executor/store"
)

// verifyAuditFile is `countersign audit verify FILE --checkpoints F --key
// K`: an exported log checked offline against signed checkpoints, as
// `aws cloudtrail validate-logs` checks logs against digest files. Exit
// status as for the store: 1 when something fails, 2 when it could not
// be checked.
func verifyAuditFile(cmd *cobra.Command, file, checkpoints, key string, asJSON bool) error {
	if checkpoints == "" || key == "" {
		return &exitError{code: exitAuditUnverified, err: errors.New(
			"verifying a FILE needs --checkpoints F (GET /v1/audit/checkpoints?format=ndjson, or your sink's copies, one per line) " +
				"and --key K (GET /.well-known/countersign-audit-keys, kept apart from the sidecar): the chain alone cannot show a rewrite")}
	}
	keys, err := readKeys(key)
	if err != nil {
		return &exitError{code: exitAuditUnverified, err: err}
	}
	cf, err := os.Open(checkpoints)
	if err != nil {
		return &exitError{code: exitAuditUnverified, err: err}
	}
	defer cf.Close()
	cps, err := audit.ReadCheckpoints(cf)
	if err != nil {
		return &exitError{code: exitAuditUnverified, err: fmt.Errorf("--checkpoints %s: %w", checkpoints, err)}
	}
	rf, err := os.Open(file)
	if err != nil {
		return &exitError{code: exitAuditUnverified, err: err}
	}
	defer rf.Close()
	rep, err := audit.VerifyExport(rf, cps, keys)
	if err != nil {
		return &exitError{code: exitAuditUnverified, err: err}
	}
	if err := printFileReport(cmd.OutOrStdout(), rep, asJSON); err != nil {
		return err
	}
	if !rep.OK {
		return &exitError{code: exitAuditBroken, err: fmt.Errorf("%s does not verify", file)}
	}
	return nil
}

// readKeys reads the trusted public keys of --key.
func readKeys(path string) (map[string]ed25519.PublicKey, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--key: %w", err)
	}
	keys, err := audit.ParseKeys(raw)
	if err != nil {
		return nil, fmt.Errorf("--key %s: %w", path, err)
	}
	return keys, nil
}

// exportCheckpoints writes the store's checkpoints as NDJSON, the
// --checkpoints file of verify, and returns how many.
func exportCheckpoints(db *store.DB, w io.Writer) (int, error) {
	cps, err := audit.Checkpoints(db, 0)
	if err != nil {
		return 0, err
	}
	enc := json.NewEncoder(w)
	for _, c := range cps {
		if err := enc.Encode(c); err != nil {
			return 0, err
		}
	}
	return len(cps), nil
}

func printFileReport(out io.Writer, rep audit.FileReport, asJSON bool) error {
	if asJSON {
		return printJSON(out, rep)
	}
	if !rep.OK {
		what := "record"
		if rep.Broken.Checkpoint {
			what = "checkpoint at record"
		}
		_, err := fmt.Fprintf(out, "broken: %s %d (id %s): %s\n", what, rep.Broken.Index, rep.Broken.ID, rep.Broken.Reason)
		return err
	}
	_, err := fmt.Fprintf(out, "ok: %d records, chain intact; %d checkpoints verified, records 1 to %d signed, %d after the last checkpoint covered by the chain alone\nhead: %s\n",
		rep.Records, rep.Checkpoints, rep.Anchored, rep.Records-int(rep.Anchored), rep.Head)
	return err
}
