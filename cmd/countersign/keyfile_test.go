package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/countersign/countersign/executor/credential"
)

// keyfile writes a file that serve --key-file reads, private to its
// owner, and never overwrites one.
func TestKeyfileCommand(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fleet.key")
	run := func() (string, error) {
		cmd := newRootCmd()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(io.Discard)
		cmd.SetArgs([]string{"keyfile", "-o", path})
		err := cmd.ExecuteContext(context.Background())
		return out.String(), err
	}
	if out, err := run(); err != nil || !strings.Contains(out, "--key-file "+path) {
		t.Fatalf("keyfile: %q, %v", out, err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("stat: %v, %v; want mode 0600", fi, err)
	}
	before, _ := os.ReadFile(path)
	f := serveFlags{data: t.TempDir(), agent: "support-agent", ledgerURL: "http://127.0.0.1:1", ordersURL: "http://127.0.0.1:1",
		issuer: "idp", issuerJWKS: "https://idp.example/jwks.json", keyFile: path}
	if o, err := f.production(); err != nil || o.KeyEncryptionKey == nil {
		t.Fatalf("serve --key-file %s: %v, key %v", path, err, o.KeyEncryptionKey)
	}
	if _, err := run(); !errors.Is(err, credential.ErrKeyEncryptionKey) {
		t.Errorf("keyfile over an existing file: %v, want refused", err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Error("the existing key file was changed")
	}
}

// A --key-file that cannot be read or is not a key is one more problem
// named at once, saying how to make one; --dev refuses it.
func TestKeyFileFlagRefuses(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.key")
	if err := os.WriteFile(bad, []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{filepath.Join(dir, "missing.key"), bad} {
		f := serveFlags{data: dir, keyFile: file}
		_, err := f.production()
		if err == nil || !strings.Contains(err.Error(), "--key-file") || !strings.Contains(err.Error(), "--agent") {
			t.Errorf("--key-file %s: %v, want a problem naming --key-file beside the others", file, err)
		}
	}
	if _, err := (serveFlags{data: dir, keyFile: bad}).production(); err == nil || !strings.Contains(err.Error(), "countersign keyfile") {
		t.Errorf("a malformed key file: %v, want the way to make one", err)
	}
	cmd := newServeCmd()
	cmd.SetArgs([]string{"--dev", "--data", dir, "--key-file", bad})
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "--key-file is for a fleet") {
		t.Errorf("--dev with --key-file: %v", err)
	}
}
