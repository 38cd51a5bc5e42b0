// Package bundles holds the released policy bundles of countersign, embedded
// in the binary so that `serve --dev`, `demo` and `drill` run from any
// directory.
//
//   - p1 is the current policy: its data.json holds the company's limits
//     in cents (auto $50.00, maximum $500.00, reshipment approval $300.00,
//     a rep's day $1,000.00, the agent's hour $3,000.00). With no bundle
//     active, the gate compares a candidate's limits with p1's.
//   - p2 is the units mistake: refund_auto and refund_max written in
//     dollars where the engine reads cents, so 100 times too large, and
//     not declared as a change. It ships passing Rego tests (they pin
//     their own limits) and the policy gate must still reject it.
//   - p3 is p1's limits released as a new revision, the fix after p2.
//
// # Releases are immutable
//
// A release is an OPA bundle .tar.gz under releases/, named for its
// revision (releases/p3.tar.gz holds revision p3). It is built once and
// never rewritten: its sha256 is its digest in the bundle history and the
// decision log, so releases/SHA256SUMS pins every release and a test fails
// when a release's bytes change. Authors edit the one Rego source, rego/;
// the limits in force are rego/data.json (a test holds it to the latest
// release's data.json). A change of rules or limits is a new revision:
//
//	countersign bundle build --revision p4 \
//	    [--limit-change refund_auto:5000:7500] -o bundles/releases/p4.tar.gz
//	(cd bundles/releases && sha256sum p4.tar.gz >> SHA256SUMS)
//
// Every releases/*.tar.gz is embedded; adding one needs no Go edit.
//
// # Order
//
// Names lists the releases oldest first: by the number a revision ends
// with (p2 before p10), then by name. A release whose revision ends in no
// number sorts before those that do; the tests refuse one.
package bundles

import (
	"archive/tar"
	"bytes"
	"cmp"
	"compress/gzip"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"testing/fstest"
)

//go:embed releases/*.tar.gz
var releases embed.FS

const (
	dir = "releases"
	ext = ".tar.gz"
)

// Names lists the embedded releases, oldest first (see Order).
var Names = names()

func names() []string {
	entries, err := releases.ReadDir(dir)
	if err != nil {
		panic(err) // the embed pattern guarantees the directory
	}
	var out []string
	for _, e := range entries {
		out = append(out, strings.TrimSuffix(e.Name(), ext))
	}
	slices.SortFunc(out, func(a, b string) int {
		return cmp.Or(cmp.Compare(sequence(a), sequence(b)), cmp.Compare(a, b))
	})
	return out
}

// sequence is the number a revision ends with ("p12" is 12), or -1 when
// it ends in none.
func sequence(revision string) int {
	n, err := strconv.Atoi(revision[len(strings.TrimRight(revision, "0123456789")):])
	if err != nil {
		return -1
	}
	return n
}

// Archive returns the .tar.gz bytes of one release, exactly as released.
func Archive(name string) ([]byte, error) {
	if strings.ContainsAny(name, `/\`) {
		return nil, fmt.Errorf("bundles: %q is not a release name: %w", name, fs.ErrNotExist)
	}
	b, err := releases.ReadFile(path.Join(dir, name+ext))
	if err != nil {
		return nil, fmt.Errorf("bundles: no release %q (have %s): %w", name, strings.Join(Names, ", "), err)
	}
	return b, nil
}

// Open returns the files of one release as a bundle directory (.manifest,
// data.json, the .rego files). Built again with policy.Build they give the
// release's bytes, and so its digest.
func Open(name string) (fs.FS, error) {
	fsys, err := open(name)
	if err != nil {
		return nil, err
	}
	return fsys, nil
}

func open(name string) (fstest.MapFS, error) {
	archive, err := Archive(name)
	if err != nil {
		return nil, err
	}
	fsys, err := unpack(archive)
	if err != nil {
		return nil, fmt.Errorf("bundles: release %s: %w", name, err)
	}
	return fsys, nil
}

// unpack reads a release's regular files into memory. Releases are this
// repository's own files, checked by their pinned digests; a bundle from
// outside is read by the policy package, which bounds it.
func unpack(archive []byte) (fstest.MapFS, error) {
	gz, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		return nil, err
	}
	fsys := fstest.MapFS{}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return fsys, nil
		}
		if err != nil {
			return nil, err
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		fsys[strings.TrimPrefix(h.Name, "/")] = &fstest.MapFile{Data: body, Mode: 0o644}
	}
}

// Variant returns the files of release base under another revision, with
// call/call.rego passed through edit and the extra files added or
// replaced: how the tests and the demo build a bundle that differs from a
// release in one rule.
func Variant(base, revision string, edit func(string) string, extra map[string]string) (fstest.MapFS, error) {
	fsys, err := open(base)
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
