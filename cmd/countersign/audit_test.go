package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/countersign/countersign/executor/audit"
	"github.com/countersign/countersign/executor/store"
)

type auditTestClock struct{ t time.Time }

func (c *auditTestClock) Now() time.Time { c.t = c.t.Add(time.Minute); return c.t }

func runAuditVerify(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newRootCmd() // through the root: the command is registered there
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(append([]string{"audit", "verify"}, args...))
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

// writeAuditLog puts n records in DIR/sidecar.db and returns their ids.
func writeAuditLog(t *testing.T, dir string, n int) []string {
	t.Helper()
	db, err := store.Open(filepath.Join(dir, "sidecar.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	log := audit.New(audit.Options{Clock: &auditTestClock{time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)}})
	var ids []string
	err = db.Update(func(tx *store.Tx) error {
		for i := range n {
			r, err := log.Append(tx, audit.Record{Kind: audit.KindSwitch, Actor: "ops-ida", Tool: "issue_refund",
				Detail: map[string]any{"enabled": i%2 == 1}})
			if err != nil {
				return err
			}
			ids = append(ids, r.ID)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func TestAuditVerifyCommand(t *testing.T) {
	dir := t.TempDir()
	ids := writeAuditLog(t, dir, 5)

	out, err := runAuditVerify(t, "--data", dir)
	if err != nil || !strings.HasPrefix(out, "ok: 5 records, chain intact\nhead: ") {
		t.Fatalf("intact log: %q, %v", out, err)
	}

	// Delete record 2 behind the sidecar's back.
	b, err := bolt.Open(filepath.Join(dir, "sidecar.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Update(func(tx *bolt.Tx) error { return tx.Bucket([]byte("audit")).Delete([]byte(ids[2])) }); err != nil {
		t.Fatal(err)
	}
	b.Close()

	out, err = runAuditVerify(t, "--data", dir)
	want := "broken: record 2 of 4 (id " + ids[3] + "): " + audit.ReasonPrev + "\n"
	if out != want || err == nil || exitCode(err) != 1 {
		t.Fatalf("broken log: %q (exit %d, %v)\nwant %q, exit 1", out, exitCode(err), err, want)
	}
	out, err = runAuditVerify(t, "--data", dir, "--json")
	if exitCode(err) != 1 || !strings.Contains(out, `"ok": false`) || !strings.Contains(out, `"index": 2`) {
		t.Fatalf("--json: %s (exit %d)", out, exitCode(err))
	}
}

func TestAuditVerifyCannotTell(t *testing.T) {
	t.Run("no file", func(t *testing.T) {
		_, err := runAuditVerify(t, "--data", t.TempDir())
		if exitCode(err) != 2 || !strings.Contains(err.Error(), "no sidecar.db") {
			t.Fatalf("exit %d, %v", exitCode(err), err)
		}
	})
	t.Run("sidecar running", func(t *testing.T) {
		dir := t.TempDir()
		writeAuditLog(t, dir, 1)
		db, err := store.Open(filepath.Join(dir, "sidecar.db"), store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		_, err = runAuditVerify(t, "--data", dir, "--lock-timeout", "50ms")
		if exitCode(err) != 2 || !strings.Contains(err.Error(), "GET /v1/audit/verify") {
			t.Fatalf("exit %d, %v", exitCode(err), err)
		}
	})
}

// TestAuditExportCommand: the export holds every record once, in order,
// each with the hash that verify recomputes and the prev that links it.
func TestAuditExportCommand(t *testing.T) {
	dir := t.TempDir()
	ids := writeAuditLog(t, dir, audit.MaxLimit+3) // more than one page
	cmd := newRootCmd()
	var out, errs bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errs)
	cmd.SetArgs([]string{"audit", "export", "--data", dir})
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("%v: %s", err, errs.String())
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != len(ids) {
		t.Fatalf("%d lines, want %d", len(lines), len(ids))
	}
	prev := ""
	for i, line := range lines {
		r, err := audit.Decode([]byte(line))
		if err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		sum, err := r.Sum()
		if err != nil || r.ID != ids[i] || r.Prev != prev || r.Hash != sum {
			t.Fatalf("line %d: id %s prev %q hash %q (recomputed %q, %v); want id %s prev %q", i+1, r.ID, r.Prev, r.Hash, sum, err, ids[i], prev)
		}
		prev = r.Hash
	}
}
