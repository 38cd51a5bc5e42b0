package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
)

// Who may loosen: a bundle goes live on one operator only when it is a pure
// tightening of the bundle it replaces. Compare says whether it is, and
// what differs, for the engine (Activate) and for the second operator's
// review.
//
// Equal policy is judged on the modules as OPA parsed them (ast.Module
// Compare: package, imports, annotations and rules, not comments or
// layout), so reformatting a file or editing its comments changes
// nothing, while any change to a rule, however small, is a change. Test
// modules are left out: no decision evaluates them. Data is judged value
// by value, by path: a key added or removed, a list changed in any way, a
// value outside the limit table changed, or a limit of the table moved the
// loosening way each make the bundle something other than a pure
// tightening.

// ModuleChangeKind says how a Rego module of a candidate differs from the
// reference's.
type ModuleChangeKind string

// The ways a module differs.
const (
	ModuleAdded   ModuleChangeKind = "added"
	ModuleRemoved ModuleChangeKind = "removed"
	// ModuleChanged: the module parses to other rules; a module that
	// differs only in layout or comments is not changed.
	ModuleChanged ModuleChangeKind = "changed"
)

// ModuleChange is one policy module (not a test) whose rules differ.
type ModuleChange struct {
	Path   string           `json:"path"`
	Change ModuleChangeKind `json:"change"`
}

// DataChangeKind says how one value of a candidate's data differs from the
// reference's.
type DataChangeKind string

// The ways a value differs. Only Tightens keeps a bundle a pure tightening.
const (
	DataAdded   DataChangeKind = "added"
	DataRemoved DataChangeKind = "removed"
	// DataTightens and DataLoosens: a number of the limit table moved one
	// way or the other (LimitChange.Loosens says which way is which).
	DataTightens DataChangeKind = "tightens"
	DataLoosens  DataChangeKind = "loosens"
	// DataChanged: any other value changed (a mode, a list, a string).
	DataChanged DataChangeKind = "changed"
)

// DataChange is one value of the data document that differs, by its path
// as Rego refers to it (data.countersign.limits.refund_auto). A list is one
// value, compared whole. Old is absent for a key the candidate adds, New
// for one it removes.
type DataChange struct {
	Path   string          `json:"path"`
	Old    json.RawMessage `json:"old,omitempty"`
	New    json.RawMessage `json:"new,omitempty"`
	Change DataChangeKind  `json:"change"`
	// Limit names the limit table's number at Path, when it is one.
	Limit string `json:"limit,omitempty"`
}

// Comparison is how a candidate differs from the bundle it would replace.
type Comparison struct {
	// Modules are the policy modules whose rules differ, by path.
	Modules []ModuleChange `json:"modules"`
	// Data are the values of the data document that differ, by path.
	Data []DataChange `json:"data"`
}

// PureTightening reports whether the candidate may go live on one
// operator: the same rules, the same data keys, and every value that
// differs a limit of the table moved the tightening way.
func (c Comparison) PureTightening() bool { return len(c.Reasons()) == 0 }

// Reasons says, one line each, why the candidate is not a pure
// tightening: what a second operator must look at. Empty for a pure
// tightening.
func (c Comparison) Reasons() []string {
	var out []string
	for _, m := range c.Modules {
		out = append(out, fmt.Sprintf("Rego module %s is %s", m.Path, m.Change))
	}
	for _, d := range c.Data {
		switch d.Change {
		case DataTightens:
		case DataAdded:
			out = append(out, fmt.Sprintf("%s is added (%s)", d.Path, d.New))
		case DataRemoved:
			out = append(out, fmt.Sprintf("%s is removed (was %s)", d.Path, d.Old))
		case DataLoosens:
			out = append(out, fmt.Sprintf("%s %s → %s loosens %s", d.Path, d.Old, d.New, d.Limit))
		default:
			out = append(out, fmt.Sprintf("%s %s → %s is not a limit", d.Path, d.Old, d.New))
		}
	}
	return out
}

// Compare compares candidate with reference, the bundle it would replace
// (the active one, or Baseline when none is active).
func Compare(reference, candidate *Bundle) (Comparison, error) {
	c := Comparison{Modules: compareModules(reference.modules, candidate.modules)}
	var err error
	c.Data, err = compareData(reference.data, candidate.data)
	if err != nil {
		return Comparison{}, fmt.Errorf("policy: compare %s with %s: %w", candidate.revision, reference.revision, err)
	}
	return c, nil
}

// compareModules compares the policy modules (not the tests) of two
// bundles. What a decision evaluates is the set of modules, not their file
// names: a module moved to another path with the same rules is no change
// (`opa build DIR` names files by the path they were built from). What is
// left is a change where one path holds other rules, and otherwise a
// module removed or added.
func compareModules(reference, candidate []Module) []ModuleChange {
	before, after := policyModules(reference), policyModules(candidate)
	for p, m := range before {
		if n, ok := after[p]; ok && m.Equal(n) {
			delete(before, p)
			delete(after, p)
		}
	}
	for _, p := range slices.Sorted(maps.Keys(before)) {
		for _, q := range slices.Sorted(maps.Keys(after)) {
			if before[p].Equal(after[q]) {
				delete(before, p)
				delete(after, q)
				break
			}
		}
	}
	var out []ModuleChange
	for _, p := range slices.Sorted(maps.Keys(before)) {
		change := ModuleRemoved
		if _, ok := after[p]; ok {
			change = ModuleChanged
		}
		out = append(out, ModuleChange{Path: p, Change: change})
	}
	for _, p := range slices.Sorted(maps.Keys(after)) {
		if _, ok := before[p]; !ok {
			out = append(out, ModuleChange{Path: p, Change: ModuleAdded})
		}
	}
	slices.SortStableFunc(out, func(a, b ModuleChange) int { return strings.Compare(a.Path, b.Path) })
	return out
}

func policyModules(ms []Module) map[string]*ast.Module {
	out := map[string]*ast.Module{}
	for _, m := range ms {
		if !m.Test {
			out[m.Path] = m.parsed
		}
	}
	return out
}

// compareData compares two data documents leaf by leaf: a scalar, a list
// or an empty object is a leaf; an object with members is its members.
func compareData(reference, candidate []byte) ([]DataChange, error) {
	before, err := leavesOf(reference)
	if err != nil {
		return nil, err
	}
	after, err := leavesOf(candidate)
	if err != nil {
		return nil, err
	}
	limits := map[string]limit{}
	for _, l := range limitTable {
		limits[dataPath(l.path())] = l
	}
	var out []DataChange
	paths := slices.AppendSeq(slices.Collect(maps.Keys(before)), maps.Keys(after))
	slices.Sort(paths)
	for _, p := range slices.Compact(paths) {
		old, inBefore := before[p]
		nu, inAfter := after[p]
		d := DataChange{Path: p}
		switch {
		case !inAfter:
			d.Change, d.Old = DataRemoved, old.raw
		case !inBefore:
			d.Change, d.New = DataAdded, nu.raw
		case ast.Compare(old.value, nu.value) == 0:
			continue
		default:
			d.Old, d.New, d.Change = old.raw, nu.raw, DataChanged
			if l, ok := limits[p]; ok {
				d.Limit, d.Change = l.name, limitDirection(l, old.value, nu.value)
			}
		}
		out = append(out, d)
	}
	return out, nil
}

// limitDirection is the way a number of the table moved. A value that is
// not a whole number cannot be in a bundle that loaded; it is a change of
// its own.
func limitDirection(l limit, old, nu ast.Value) DataChangeKind {
	from, okFrom := wholeNumber(old)
	to, okTo := wholeNumber(nu)
	switch {
	case !okFrom || !okTo:
		return DataChanged
	case (LimitChange{Name: l.name, From: from, To: to}).Loosens():
		return DataLoosens
	}
	return DataTightens
}

func wholeNumber(v ast.Value) (int64, bool) {
	n, ok := v.(ast.Number)
	if !ok {
		return 0, false
	}
	return n.Int64()
}

// leaf is one value of a data document: as JSON, for the record, and as
// an OPA value, which compares numbers by value (5000 and 5000.0 are one
// number, as they are to a policy).
type leaf struct {
	raw   json.RawMessage
	value ast.Value
}

func leavesOf(doc []byte) (map[string]leaf, error) {
	d := json.NewDecoder(bytes.NewReader(doc))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, fmt.Errorf("data document: %w", err)
	}
	out := map[string]leaf{}
	var walk func(path []string, v any) error
	walk = func(path []string, v any) error {
		if obj, ok := v.(map[string]any); ok && len(obj) > 0 {
			for k, x := range obj {
				if err := walk(append(slices.Clip(path), k), x); err != nil {
					return err
				}
			}
			return nil
		}
		raw, err := json.Marshal(v)
		if err != nil {
			return err
		}
		value, err := ast.InterfaceToValue(v)
		if err != nil {
			return err
		}
		out[dataPath(path)] = leaf{raw: raw, value: value}
		return nil
	}
	return out, walk(nil, v)
}

// dataPath is a path in the data document as Rego refers to it:
// data.countersign.limits.refund_auto, data.x["not an identifier"].
func dataPath(path []string) string {
	ref := ast.Ref{ast.DefaultRootDocument}
	for _, k := range path {
		ref = append(ref, ast.StringTerm(k))
	}
	return ref.String()
}
