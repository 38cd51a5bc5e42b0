package policy_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/countersign/countersign/bundles"
	"github.com/countersign/countersign/executor/policy"
)

// Every way of loading p1 gives the same bundle and the same digest, that
// of the release, and building twice gives the same bytes.
func TestLoadSourcesAgree(t *testing.T) {
	files, err := bundles.Open("p1")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "p1")
	if err := os.CopyFS(dir, files); err != nil {
		t.Fatal(err)
	}
	fromDir, err := policy.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	archive, err := policy.Build(os.DirFS(dir))
	if err != nil {
		t.Fatal(err)
	}
	again, err := policy.Build(os.DirFS(dir))
	if err != nil || !bytes.Equal(archive, again) {
		t.Fatalf("Build is not deterministic (err %v)", err)
	}
	file := filepath.Join(t.TempDir(), "p1.tar.gz")
	if err := os.WriteFile(file, archive, 0o600); err != nil {
		t.Fatal(err)
	}
	fromFile, err := policy.LoadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	fromPath, err := policy.LoadPath(file)
	if err != nil {
		t.Fatal(err)
	}
	fromBytes, err := policy.LoadArchive(archive)
	if err != nil {
		t.Fatal(err)
	}
	fromEmbed := embedded(t, "p1")
	release, err := bundles.Archive("p1")
	if err != nil {
		t.Fatal(err)
	}
	fromRelease, err := policy.LoadArchive(release)
	if err != nil {
		t.Fatal(err)
	}

	for name, b := range map[string]*policy.Bundle{"file": fromFile, "path": fromPath, "bytes": fromBytes, "embed": fromEmbed, "release": fromRelease} {
		if b.Digest() != fromDir.Digest() || b.Revision() != "p1" || b.Limits() != fromDir.Limits() {
			t.Errorf("%s: %s %s, want %s p1", name, b.Revision(), b.Digest(), fromDir.Digest())
		}
	}
	if _, err := hex.DecodeString(fromDir.Digest()); err != nil || len(fromDir.Digest()) != 64 {
		t.Errorf("digest %q is not hex sha256", fromDir.Digest())
	}
	if !bytes.Equal(fromDir.Archive(), archive) {
		t.Error("Archive() is not the built archive")
	}
}

// An archive made by `opa build` (paths with a leading slash, directories
// as entries) loads too.
func TestLoadForeignLayout(t *testing.T) {
	dir, err := bundles.Open("p3")
	if err != nil {
		t.Fatal(err)
	}
	var entries []entry
	entries = append(entries, entry{name: "/call/", kind: tar.TypeDir})
	for _, name := range []string{".manifest", "data.json", "call/call.rego", "approver/approver.rego"} {
		body, err := fsReadFile(dir, name)
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, entry{name: "/" + name, body: body})
	}
	b, err := policy.LoadArchive(tarGz(t, entries...))
	if err != nil {
		t.Fatal(err)
	}
	if b.Revision() != "p3" {
		t.Errorf("revision %q", b.Revision())
	}
}

func TestLoadRefusesBadBundles(t *testing.T) {
	manifest := entry{name: ".manifest", body: `{"revision": "x", "roots": ["countersign"], "rego_version": 1}`}
	data := entry{name: "data.json", body: p1Limits}
	call := entry{name: "call/call.rego", body: "package countersign.call\n\ndecision := 1\n"}
	withLimits := func(limits string) []byte {
		return tarGz(t, manifest, call, entry{name: "data.json", body: `{"countersign": {"limits": ` + limits + `}}`})
	}
	var many []entry
	for i := range policy.MaxFiles + 1 {
		many = append(many, entry{name: fmt.Sprintf("f%d.json", i), body: "{}"})
	}

	tests := []struct {
		name    string
		archive []byte
		want    error
		message string
	}{
		{"empty", nil, policy.ErrInvalidBundle, "not a gzip archive"},
		{"not gzip", []byte("hello"), policy.ErrInvalidBundle, "not a gzip archive"},
		{"gzip of text", gzipped(t, []byte("hello, this is not a tar archive at all, not even close")), policy.ErrInvalidBundle, "not a tar archive"},
		{"no files", tarGz(t), policy.ErrInvalidBundle, "no files"},
		{"climbs out", tarGz(t, manifest, data, entry{name: "../evil.rego", body: "package x"}), policy.ErrInvalidBundle, "unsafe path"},
		{"climbs out inside", tarGz(t, manifest, data, entry{name: "a/../../evil.rego", body: "package x"}), policy.ErrInvalidBundle, "unsafe path"},
		{"symlink", tarGz(t, manifest, data, entry{name: "link.rego", kind: tar.TypeSymlink}), policy.ErrInvalidBundle, "not a regular file"},
		{"duplicate", tarGz(t, manifest, data, data), policy.ErrInvalidBundle, "appears twice"},
		{"too many files", tarGz(t, many...), policy.ErrBundleTooLarge, "more than"},
		{"archive too large", make([]byte, policy.MaxArchiveBytes+1), policy.ErrBundleTooLarge, "archive is over"},
		{"unpacks too large", tarGz(t, manifest, entry{name: "big.json", body: strings.Repeat(" ", policy.MaxUnpackedBytes) + "{}"}), policy.ErrBundleTooLarge, "unpacked"},
		{"no revision", tarGz(t, entry{name: ".manifest", body: `{"roots": ["countersign"]}`}, data, call), policy.ErrInvalidBundle, "no revision"},
		{"no limits", tarGz(t, manifest, call), policy.ErrInvalidBundle, "data.countersign.limits is missing"},
		{"limits as strings", withLimits(`{"refund_auto": "5000"}`), policy.ErrInvalidBundle, "refund_auto must be a whole number"},
		{"every missing limit listed", withLimits(`{}`), policy.ErrInvalidBundle, "token_ttl_seconds must be"},
		{"negative limit", withLimits(strings.Replace(p1LimitsObject, "5000,", "-5000,", 1)), policy.ErrInvalidBundle, "refund_auto"},
		{"fractional limit", withLimits(strings.Replace(p1LimitsObject, "5000,", "50.5,", 1)), policy.ErrInvalidBundle, "refund_auto"},
		{"rego does not parse", tarGz(t, manifest, data, entry{name: "call/call.rego", body: "package countersign.call\n\ndecision := {\n"}), policy.ErrInvalidBundle, "call.rego"},
		{"rego does not compile", tarGz(t, manifest, data, entry{name: "call/call.rego", body: "package countersign.call\n\ndecision := no_such_rule\n"}), policy.ErrInvalidBundle, "no_such_rule"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := policy.LoadArchive(tt.archive)
			if !errors.Is(err, tt.want) {
				t.Fatalf("LoadArchive = %v, %v; want %v", b, err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.message) {
				t.Errorf("error %q does not say %q", err, tt.message)
			}
		})
	}
}

func TestBuildRefuses(t *testing.T) {
	if _, err := policy.Build(os.DirFS(t.TempDir())); !errors.Is(err, policy.ErrInvalidBundle) {
		t.Errorf("empty directory: %v", err)
	}
	dir := t.TempDir()
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "data.json")); err != nil {
		t.Skip(err)
	}
	if _, err := policy.Build(os.DirFS(dir)); !errors.Is(err, policy.ErrInvalidBundle) {
		t.Errorf("symlink: %v", err)
	}
	if _, err := policy.LoadPath(filepath.Join(dir, "missing")); err == nil {
		t.Error("LoadPath of a missing path succeeded")
	}
}

// FuzzLoadArchive feeds arbitrary bytes to the upload path: it must never
// panic, and every refusal must be one of the documented errors.
func FuzzLoadArchive(f *testing.F) {
	dir, err := bundles.Open("p1")
	if err != nil {
		f.Fatal(err)
	}
	p1, err := policy.Build(dir)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(p1)
	f.Add(p1[:len(p1)/2])
	f.Add([]byte{})
	f.Add([]byte("not a bundle"))
	f.Add(gzipped(f, []byte("not a tar")))
	f.Add(tarGz(f, entry{name: "../x", body: "x"}))
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := policy.LoadArchive(data)
		if err != nil {
			if !errors.Is(err, policy.ErrInvalidBundle) && !errors.Is(err, policy.ErrBundleTooLarge) {
				t.Fatalf("unclassified error: %v", err)
			}
			return
		}
		if b.Revision() == "" || len(b.Digest()) != 64 {
			t.Fatalf("loaded a bundle without revision or digest: %q %q", b.Revision(), b.Digest())
		}
	})
}

func gzipped(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	if _, err := gz.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
