// Package bundles holds the versioned policy bundles of countersign, embedded
// in the binary so that `serve --dev` and `demo` run from any directory.
//
//   - p1 is the current policy: its data.json holds the company's limits
//     in cents (auto $50.00, maximum $500.00, reshipment approval $300.00,
//     a rep's day $1,000.00, the agent's hour $3,000.00).
//   - p2 is the units mistake: refund_auto and refund_max written in
//     dollars where the engine reads cents, so 100 times too large. It ships
//     passing Rego tests (they pin their own limits) and the policy gate
//     must still reject it.
//   - p3 is p1's limits released as a new revision, the fix after p2.
//
// The .rego files of every bundle are copies of rego/, kept byte-identical
// by a test; only .manifest and data.json differ between bundles.
package bundles

import (
	"embed"
	"io/fs"
	"testing/fstest"
)

//go:embed all:p1 all:p2 all:p3
var embedded embed.FS

// Names lists the embedded bundles, oldest first.
var Names = []string{"p1", "p2", "p3"}

// FS returns the embedded bundles: one directory per name in Names, each a
// standard OPA bundle directory.
func FS() fs.FS { return embedded }

// Open returns the directory of one embedded bundle.
func Open(name string) (fs.FS, error) {
	if _, err := fs.Stat(embedded, name+"/.manifest"); err != nil {
		return nil, err
	}
	return fs.Sub(embedded, name)
}

// Variant returns the files of embedded bundle base under another revision,
// with call/call.rego passed through edit and the extra files added or
// replaced: how the tests and the demo build a bundle that differs from a
// release in one rule.
func Variant(base, revision string, edit func(string) string, extra map[string]string) (fstest.MapFS, error) {
	src, err := Open(base)
	if err != nil {
		return nil, err
	}
	fsys := fstest.MapFS{}
	err = fs.WalkDir(src, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(src, p)
		fsys[p] = &fstest.MapFile{Data: b}
		return err
	})
	if err != nil {
		return nil, err
	}
	fsys[".manifest"] = &fstest.MapFile{Data: []byte(`{"revision": "` + revision + `", "roots": ["countersign"], "rego_version": 1}`)}
	fsys["call/call.rego"].Data = []byte(edit(string(fsys["call/call.rego"].Data)))
	for name, body := range extra {
		fsys[name] = &fstest.MapFile{Data: []byte(body)}
	}
	return fsys, nil
}
