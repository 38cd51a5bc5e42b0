package bundles_test

import (
	"bytes"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/countersign/countersign/bundles"
)

// TestRegoMatchesSource keeps every bundle's policy a byte-identical copy of
// rego/, the only place authors edit: a bundle differs from another in its
// .manifest and data.json, never in its rules.
func TestRegoMatchesSource(t *testing.T) {
	src := os.DirFS(filepath.Join("..", "rego"))
	want := regoFiles(t, src)
	if len(want) == 0 {
		t.Fatal("no .rego files under rego/")
	}
	const resync = "resync with: for p in p1 p2 p3; do rm -rf bundles/$p/*/ && cp -r rego/. bundles/$p/; done"
	for _, name := range bundles.Names {
		t.Run(name, func(t *testing.T) {
			dir, err := bundles.Open(name)
			if err != nil {
				t.Fatal(err)
			}
			got := regoFiles(t, dir)
			for p, w := range want {
				g, ok := got[p]
				switch {
				case !ok:
					t.Errorf("bundles/%s/%s is missing; %s", name, p, resync)
				case !bytes.Equal(g, w):
					t.Errorf("bundles/%s/%s differs from rego/%s; %s", name, p, p, resync)
				}
			}
			for p := range got {
				if _, ok := want[p]; !ok {
					t.Errorf("bundles/%s/%s has no source in rego/; %s", name, p, resync)
				}
			}
		})
	}
}

func TestEmbeddedBundlesHaveManifestAndData(t *testing.T) {
	for _, name := range bundles.Names {
		dir, err := bundles.Open(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, f := range []string{".manifest", "data.json"} {
			b, err := fs.ReadFile(dir, f)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if f == ".manifest" && !strings.Contains(string(b), `"revision": "`+name+`"`) {
				t.Errorf("%s/.manifest does not carry revision %q:\n%s", name, name, b)
			}
		}
	}
	if _, err := bundles.Open("p9"); err == nil {
		t.Error("Open(p9) found a bundle that does not exist")
	}
}

func regoFiles(t *testing.T, fsys fs.FS) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || path.Ext(p) != ".rego" {
			return err
		}
		b, err := fs.ReadFile(fsys, p)
		out[p] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
