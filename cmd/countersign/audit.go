package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/countersign/countersign/cmd/stack"
	"github.com/countersign/countersign/executor/audit"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/sidecar/client"
)

// Exit codes of audit verify: like diff and grep, 1 is the answer "no" and
// 2 is "could not tell".
const (
	exitAuditBroken     = 1
	exitAuditUnverified = 2
)

func newAuditCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Check the hash-chained audit log",
	}
	cmd.AddCommand(newAuditVerifyCmd(), newAuditExportCmd(), newAuditExplainCmd())
	return cmd
}

// openStopped opens DIR/sidecar.db for a command that reads a stopped
// sidecar's state (the audit log, the decision log), with messages that say
// what to do when it is missing or held by a running sidecar (instead names
// the request that asks the running sidecar).
func openStopped(data string, timeout time.Duration, instead string) (*store.DB, error) {
	if data == "" {
		return nil, errors.New("--data DIR is required: the directory the sidecar keeps its state in")
	}
	path := filepath.Join(data, stack.StoreFile)
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			err = fmt.Errorf("no sidecar.db in %s: pass the --data directory of `countersign serve`", data)
		}
		return nil, err
	}
	db, err := store.Open(path, store.Options{Timeout: timeout})
	if errors.Is(err, store.ErrLocked) {
		return nil, fmt.Errorf(
			"%s is locked: the sidecar is running and holds it. Ask the sidecar instead (%s with an operator token), or stop it and run this again",
			path, instead)
	}
	return db, err
}

func newAuditExportCmd() *cobra.Command {
	var (
		data, out   string
		checkpoints string
		timeout     time.Duration
		remote      remoteFlags
		q           client.AuditExport
		since       string
		until       string
	)
	cmd := &cobra.Command{
		Use:   "export (--data DIR | --sidecar URL --token-file F [filters]) [-o FILE] [--checkpoints F]",
		Short: "Write the audit log as NDJSON, one record per line with its prev and hash",
		Long: `Write every record of the audit log, oldest first, as NDJSON: one JSON
object per line, exactly as GET /v1/audit answers it (id, at, kind, actor,
the record's fields and detail, prev and hash). A reviewer can recompute
each hash from the record and follow the chain from prev to prev;
countersign audit verify does both. --checkpoints writes the signed
checkpoints too (one per line, as GET /v1/audit/checkpoints?format=ndjson
answers), for countersign audit verify FILE --checkpoints F --key K.

With --data DIR it reads DIR/sidecar.db, which a running sidecar holds
locked. With --sidecar URL and an operator's --token-file it streams
GET /v1/audit?format=ndjson from the running sidecar instead (on a fleet,
from any of its sidecars), and takes filters: --from (a chain position,
from 0), --since and --until (RFC 3339), --workflow, --rep, --rule. A
filtered export is a selection, not a chain: verify the whole one.`,
		Example: `  countersign audit export --data /tmp/cs > audit.ndjson
  countersign audit export --sidecar http://127.0.0.1:8080 --token-file ops.jwt -o audit.ndjson
  countersign audit export --sidecar http://127.0.0.1:8080 --token-file ops.jwt --workflow W1`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			filtered := q.From > 0 || since != "" || until != "" || q.Workflow != "" || q.Rep != "" || q.Rule != ""
			switch {
			case data != "" && remote.set():
				return errors.New("--data and --sidecar: choose one; --data reads a stopped sidecar's files, --sidecar asks a running one")
			case data != "" && filtered:
				return errors.New("--from, --since, --until, --workflow, --rep and --rule select from a running sidecar's export (--sidecar); with --data the whole log is written")
			case data == "" && !remote.set():
				return errors.New("say where the log is: --data DIR (a stopped sidecar's data directory) or --sidecar URL --token-file F (a running one, with an operator's token)")
			}
			if data != "" {
				db, err := openStopped(data, timeout, "countersign audit export --sidecar URL --token-file F")
				if err != nil {
					return err
				}
				defer db.Close()
				err = writeExport(cmd.OutOrStdout(), cmd.ErrOrStderr(), out, "audit records", func(w io.Writer) (int, error) { return exportAudit(db, w) })
				if err != nil || checkpoints == "" {
					return err
				}
				return writeExport(cmd.OutOrStdout(), cmd.ErrOrStderr(), checkpoints, "signed checkpoints", func(w io.Writer) (int, error) {
					return exportCheckpoints(db, w)
				})
			}
			var err error
			if q.Since, err = flagTime("since", since); err != nil {
				return err
			}
			if q.Until, err = flagTime("until", until); err != nil {
				return err
			}
			c, err := remote.client()
			if err != nil {
				return err
			}
			err = writeExport(cmd.OutOrStdout(), cmd.ErrOrStderr(), out, "audit records", func(w io.Writer) (int, error) {
				return c.ExportAudit(cmd.Context(), q, w)
			})
			if err != nil || checkpoints == "" {
				return err
			}
			return writeExport(cmd.OutOrStdout(), cmd.ErrOrStderr(), checkpoints, "signed checkpoints", func(w io.Writer) (int, error) {
				return c.ExportCheckpoints(cmd.Context(), w)
			})
		},
	}
	cmd.Flags().StringVar(&data, "data", "", "the stopped sidecar's data directory (holds sidecar.db)")
	cmd.Flags().StringVarP(&out, "output", "o", "", "write to this file instead of standard output")
	cmd.Flags().StringVar(&checkpoints, "checkpoints", "", "also write the signed checkpoints to this file (NDJSON), for audit verify FILE --checkpoints")
	cmd.Flags().DurationVar(&timeout, "lock-timeout", time.Second, "how long to wait for a running sidecar to release the file")
	remote.add(cmd.Flags(), "an operator's")
	cmd.Flags().Uint64Var(&q.From, "from", 0, "with --sidecar: start at this chain position (from 0)")
	cmd.Flags().StringVar(&since, "since", "", "with --sidecar: only records at or after this RFC 3339 time")
	cmd.Flags().StringVar(&until, "until", "", "with --sidecar: only records before this RFC 3339 time")
	cmd.Flags().StringVar(&q.Workflow, "workflow", "", "with --sidecar: only this workflow's records")
	cmd.Flags().StringVar(&q.Rep, "rep", "", "with --sidecar: only the records of this rep's workflows, and those the rep made")
	cmd.Flags().StringVar(&q.Rule, "rule", "", "with --sidecar: only the decision records of this rule")
	return cmd
}

// exportAudit writes the whole log as NDJSON, a page at a time, and
// returns how many records it wrote.
func exportAudit(db *store.DB, w io.Writer) (int, error) {
	log := audit.New(audit.Options{})
	enc := json.NewEncoder(w)
	n, after := 0, ""
	for {
		page, err := log.List(db, after, audit.MaxLimit)
		if err != nil {
			return n, err
		}
		for _, r := range page.Records {
			if err := enc.Encode(r); err != nil {
				return n, err
			}
			n++
		}
		if page.Next == "" {
			return n, nil
		}
		after = page.Next
	}
}

func newAuditVerifyCmd() *cobra.Command {
	var (
		data, checkpoints, key string
		asJSON                 bool
		timeout                time.Duration
	)
	cmd := &cobra.Command{
		Use:   "verify --data DIR | verify FILE.ndjson --checkpoints F --key K",
		Short: "Verify the audit chain in DIR/sidecar.db, or an exported file against signed checkpoints, and report the first broken link",
		Long: `Walk the audit log in DIR/sidecar.db (the sidecar's state file) in order
and check every link: each record decodes, its prev is the previous record's
hash, its hash recomputes, and its id is the key it is stored under.

Exit status: 0 when the chain is intact, 1 when a link is broken (the first
one is printed), 2 when the log could not be checked (no file, or the file is
locked because the sidecar is running: ask the sidecar instead with
GET /v1/audit/verify and an operator token).

The head hash printed on success identifies the whole chain; kept elsewhere,
it lets a later check notice a truncated or rewritten tail, which the chain
alone cannot show.

With FILE instead of --data, an exported log (NDJSON, one record per line:
GET /v1/audit?format=ndjson or countersign audit export) is checked offline
against signed checkpoints, as aws cloudtrail validate-logs checks digest
files: every record's hash and link, and that each checkpoint of F
(GET /v1/audit/checkpoints?format=ndjson, countersign audit export
--checkpoints, or the copies --audit-checkpoint-url received) is signed by a
key of K (GET /.well-known/countersign-audit-keys, a JWK or a PEM public
key, obtained apart from the sidecar) and names the record at its position
with that record's hash. Whoever rewrites the whole store, recomputing every
hash, fails there without the key.`,
		Example: `  countersign audit verify --data /tmp/cs
  countersign audit verify --data /tmp/cs --json
  countersign audit verify audit.ndjson --checkpoints checkpoints.ndjson --key audit-keys.json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				if data != "" {
					return &exitError{code: exitAuditUnverified, err: errors.New("give either --data DIR (a stopped sidecar's store) or FILE (an export), not both")}
				}
				return verifyAuditFile(cmd, args[0], checkpoints, key, asJSON)
			}
			db, err := openStopped(data, timeout, "GET /v1/audit/verify")
			if err != nil {
				return &exitError{code: exitAuditUnverified, err: err}
			}
			defer db.Close()
			rep, err := audit.Verify(db)
			if err != nil {
				return &exitError{code: exitAuditUnverified, err: err}
			}
			out := cmd.OutOrStdout()
			if asJSON {
				if err := printJSON(out, rep); err != nil {
					return err
				}
			} else if rep.OK {
				fmt.Fprintf(out, "ok: %d records, chain intact\n", rep.Records)
				if rep.Checkpoints > 0 {
					fmt.Fprintf(out, "checkpoints: %d signed checkpoints match it, the last at record %d\n", rep.Checkpoints, rep.Anchored)
				}
				if rep.Head != "" {
					fmt.Fprintf(out, "head: %s\n", rep.Head)
				}
			} else {
				fmt.Fprintf(out, "broken: record %d of %d (id %s): %s\n",
					rep.Broken.Index, rep.Records, rep.Broken.ID, rep.Broken.Reason)
			}
			if !rep.OK {
				return &exitError{code: exitAuditBroken, err: fmt.Errorf("audit chain broken at record %d", rep.Broken.Index)}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&data, "data", "", "the sidecar's data directory (holds sidecar.db)")
	cmd.Flags().BoolVar(&asJSON, "json", false, `print the report as JSON ({"ok", "records", "head", "broken"}; with FILE also "checkpoints", "anchored")`)
	cmd.Flags().StringVar(&checkpoints, "checkpoints", "", "with FILE: the signed checkpoints, NDJSON one per line")
	cmd.Flags().StringVar(&key, "key", "", "with FILE: the trusted public key(s): a JWKS as GET /.well-known/countersign-audit-keys answers, a JWK, or a PEM public key")
	cmd.Flags().DurationVar(&timeout, "lock-timeout", time.Second, "how long to wait for a running sidecar to release the file")
	return cmd
}
