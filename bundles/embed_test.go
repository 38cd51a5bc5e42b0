package bundles_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/countersign/countersign/bundles"
	"github.com/countersign/countersign/executor/policy"
)

// pinned reads releases/SHA256SUMS: release name → sha256.
func pinned(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open(filepath.Join("releases", "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, file, ok := strings.Cut(sc.Text(), "  ")
		name, isRelease := strings.CutSuffix(file, ".tar.gz")
		if !ok || !isRelease || len(sum) != 64 {
			t.Fatalf("SHA256SUMS: %q is not a line of sha256sum for a release", sc.Text())
		}
		out[name] = sum
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// A release never changes once released: its digest is in every history
// record and decision that names it.
func TestReleasesAreImmutable(t *testing.T) {
	sums := pinned(t)
	for _, name := range bundles.Names {
		archive, err := bundles.Archive(name)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(archive)
		switch want, ok := sums[name]; {
		case !ok:
			t.Errorf("releases/%s.tar.gz is not pinned: add its line with (cd bundles/releases && sha256sum %s.tar.gz >> SHA256SUMS)", name, name)
		case hex.EncodeToString(sum[:]) != want:
			t.Errorf("releases/%s.tar.gz has sha256 %x, but SHA256SUMS pins %s: releases are immutable; "+
				"restore it (git checkout bundles/releases/%s.tar.gz) and release the change as a new revision",
				name, sum, want, name)
		}
		delete(sums, name)
	}
	for name := range sums {
		t.Errorf("SHA256SUMS pins %s.tar.gz, which is not in releases/", name)
	}
}

func TestReleasesLoad(t *testing.T) {
	if want := []string{"p1", "p2", "p3"}; !slices.Equal(bundles.Names[:3], want) {
		t.Fatalf("Names begins %v, want %v", bundles.Names, want)
	}
	for _, name := range bundles.Names {
		t.Run(name, func(t *testing.T) {
			archive, err := bundles.Archive(name)
			if err != nil {
				t.Fatal(err)
			}
			b, err := policy.LoadArchive(archive)
			if err != nil {
				t.Fatal(err)
			}
			if b.Revision() != name {
				t.Errorf("releases/%s.tar.gz holds revision %q; a release is named for its revision", name, b.Revision())
			}
			// Open gives the files, which build again into the release.
			dir, err := bundles.Open(name)
			if err != nil {
				t.Fatal(err)
			}
			again, err := policy.LoadFS(dir)
			if err != nil || again.Digest() != b.Digest() {
				t.Errorf("the files of %s build into another bundle (%v)", name, err)
			}
		})
	}
	for _, bad := range []string{"p9", "../p1", "releases/p1"} {
		if _, err := bundles.Open(bad); err == nil {
			t.Errorf("Open(%q) found a release", bad)
		}
	}
}

// The one Rego source builds into a bundle that passes the gate with its
// own data, rego/data.json, against the latest fixed release: rego/ is
// ready to release.
func TestSourcePassesTheGate(t *testing.T) {
	p3, err := bundles.Open("p3")
	if err != nil {
		t.Fatal(err)
	}
	src, err := policy.Source(os.DirFS(filepath.Join("..", "rego")), sourceData(t), "source", nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := policy.LoadFS(src)
	if err != nil {
		t.Fatal(err)
	}
	reference, err := policy.LoadFS(p3)
	if err != nil {
		t.Fatal(err)
	}
	r, err := policy.Check(context.Background(), b, reference.Limits())
	if err != nil {
		t.Fatal(err)
	}
	if !r.Passed() {
		t.Errorf("rego/ with p3's data fails the gate: %+v, Rego tests %v", r.Failures(), r.TestFailures)
	}
}
