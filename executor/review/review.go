package review

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/countersign/countersign/executor/policy"
)

// Review is what a second operator is shown of a candidate bundle: how it
// differs from the bundle it would replace and what it newly allows.
// Every list is sorted, so the same two bundles (and the same logged
// inputs) always give the same review. The zero Review is "none made"
// (a record from before reviews), and every member is then left out of
// JSON.
type Review struct {
	// Against is the bundle the candidate is compared with: the active
	// one, or the baseline release when none is.
	Against Bundle `json:"against,omitzero"`
	// SecondOperator says why the candidate needs a second operator, one
	// reason a line; [] for a pure tightening (policy.Comparison).
	SecondOperator []string `json:"second_operator,omitzero"`
	// Diff is each Rego file that differs, as a unified diff.
	Diff []ModuleDiff `json:"diff,omitzero"`
	// DataDiff is each value of the data that differs, by path.
	DataDiff []policy.DataChange `json:"data_diff,omitzero"`
	// NewAllowances are the generated inputs on which the candidate is
	// more permissive than the bundle it replaces.
	NewAllowances Allowances `json:"new_allowances,omitzero"`
}

// Bundle names a bundle.
type Bundle struct {
	Revision string `json:"revision"`
	Digest   string `json:"digest"`
}

// ModuleChange says how a Rego file differs.
type ModuleChange string

// The ways a file differs.
const (
	ModuleAdded    ModuleChange = "added"
	ModuleRemoved  ModuleChange = "removed"
	ModuleModified ModuleChange = "modified"
)

// ModuleDiff is one Rego file of either bundle whose text differs.
type ModuleDiff struct {
	// Path is the file in the candidate (in the reference when removed).
	Path string `json:"path"`
	// OldPath is the reference's file compared with it, when another path
	// holds the same package there.
	OldPath string       `json:"old_path,omitzero"`
	Change  ModuleChange `json:"change"`
	// Test is set for a *_test.rego file, which no decision evaluates.
	Test bool `json:"test,omitzero"`
	// PolicyChanged is false for a file that differs only in layout or
	// comments, and for a test.
	PolicyChanged bool `json:"policy_changed"`
	// Unified is the diff in the unified format of diff -u, a file added
	// or removed shown whole.
	Unified string `json:"unified"`
	// Truncated is set when Unified stops short (see MaxDiffBytes).
	Truncated bool `json:"truncated,omitzero"`
}

// MaxDiffBytes bounds the unified diffs of one review together. A bundle
// unpacks to at most policy.MaxUnpackedBytes; a review stored with every
// attempt should not weigh twice that. The new allowances do not depend
// on it.
const MaxDiffBytes = 1 << 20

// New reviews candidate against reference, the bundle it would replace:
// their differences (policy.Compare), the unified diff of each Rego file
// and the new allowances, generated from what both bundles mention, the
// gate's cases and logged, a sample of recent logged decision inputs
// (most recent first; see NewAllowances).
func New(ctx context.Context, reference, candidate *policy.Bundle, logged []policy.Input) (Review, error) {
	c, err := policy.Compare(reference, candidate)
	if err != nil {
		return Review{}, fmt.Errorf("review: %w", err)
	}
	r := Review{
		Against:        Bundle{Revision: reference.Revision(), Digest: reference.Digest()},
		SecondOperator: append([]string{}, c.Reasons()...),
		Diff:           append([]ModuleDiff{}, Diff(reference, candidate)...),
		DataDiff:       append([]policy.DataChange{}, c.Data...),
	}
	if len(c.Modules) == 0 && len(c.Data) == 0 {
		// The same rules on the same data decide every input the same.
		r.NewAllowances = Allowances{Examples: []Allowance{}, Skipped: "the candidate has the rules and data of the bundle it replaces"}
		return r, nil
	}
	if r.NewAllowances, err = NewAllowances(ctx, reference, candidate, logged); err != nil {
		return Review{}, err
	}
	return r, nil
}

// Diff is the unified diff of every Rego file that differs between the
// two bundles, tests included, sorted by path. A file is compared with the
// file of the same path; one left without is compared with a file of the
// same package under another path, if there is one (a bundle built by
// `opa build DIR` names its files by where they were built), and is
// otherwise shown whole as added or removed.
func Diff(reference, candidate *policy.Bundle) []ModuleDiff {
	before, after := reference.Modules(), candidate.Modules()
	nu := map[string]policy.Module{}
	for _, m := range after {
		nu[m.Path] = m
	}
	type pair struct{ from, to *policy.Module }
	var pairs []pair
	var gone []policy.Module
	for _, m := range before {
		if n, ok := nu[m.Path]; ok {
			pairs = append(pairs, pair{&m, &n})
			delete(nu, m.Path)
			continue
		}
		gone = append(gone, m)
	}
	var left []policy.Module
	for _, m := range gone {
		if n, ok := samePackage(m, nu); ok {
			pairs = append(pairs, pair{&m, &n})
			delete(nu, n.Path)
			continue
		}
		left = append(left, m)
	}
	for _, m := range left {
		pairs = append(pairs, pair{from: &m})
	}
	for _, p := range slices.Sorted(maps.Keys(nu)) {
		n := nu[p]
		pairs = append(pairs, pair{to: &n})
	}
	var out []ModuleDiff
	budget := MaxDiffBytes
	for _, p := range pairs {
		d := moduleDiff(p.from, p.to)
		if d.Unified == "" {
			continue
		}
		if len(d.Unified) > budget {
			d.Unified, d.Truncated = cut(d.Unified, budget), true
		}
		budget -= len(d.Unified)
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b ModuleDiff) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// samePackage finds, among the candidate's files not yet compared, the
// first (by path) of m's package and kind.
func samePackage(m policy.Module, candidates map[string]policy.Module) (policy.Module, bool) {
	pkg := m.Parsed().Package.Path
	for _, p := range slices.Sorted(maps.Keys(candidates)) {
		n := candidates[p]
		if n.Test == m.Test && n.Parsed().Package.Path.Equal(pkg) {
			return n, true
		}
	}
	return policy.Module{}, false
}

func moduleDiff(from, to *policy.Module) ModuleDiff {
	switch {
	case from == nil:
		return ModuleDiff{Path: to.Path, Change: ModuleAdded, Test: to.Test, PolicyChanged: !to.Test,
			Unified: unified("/dev/null", "b"+to.Path, "", to.Text)}
	case to == nil:
		return ModuleDiff{Path: from.Path, Change: ModuleRemoved, Test: from.Test, PolicyChanged: !from.Test,
			Unified: unified("a"+from.Path, "/dev/null", from.Text, "")}
	}
	d := ModuleDiff{Path: to.Path, Change: ModuleModified, Test: to.Test,
		PolicyChanged: !to.Test && !equalModules(from.Parsed(), to.Parsed()),
		Unified:       unified("a"+from.Path, "b"+to.Path, from.Text, to.Text)}
	if from.Path != to.Path {
		d.OldPath = from.Path
	}
	return d
}

func equalModules(a, b *ast.Module) bool { return a.Equal(b) }

// cut shortens a diff to at most n bytes at a line's end, and says so.
func cut(s string, n int) string {
	const note = "\\ ... the review's diffs stop here (MaxDiffBytes); export the bundle to read the rest\n"
	n = max(0, n-len(note))
	if i := strings.LastIndexByte(s[:n], '\n'); i >= 0 {
		return s[:i+1] + note
	}
	return note
}
