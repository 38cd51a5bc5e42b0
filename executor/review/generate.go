package review

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/tool"
)

// The generated inputs. A policy is a function of its input and its data;
// where two bundles differ, they differ on inputs that meet the literals
// they mention. So the inputs are built from those literals (every string
// and whole number of either bundle's policy modules and data, each
// number also a cent either side), put in the places of the input where
// they can stand, starting from inputs that are realistic: the gate's
// boundary cases at both bundles' limits, and a sample of recent logged
// decision inputs.
//
// A literal the rules compare with an input member (input.user.id !=
// "rep-ben", input.args.amount >= 45000) is targeted at that member; the
// literals one rule body targets are also applied together (a combo), so
// that a rule for one rep on one order at one amount is met by an input
// with all three. Untargeted literals stand where their shape fits: an
// order id (^O-[0-9]{1,12}$, the API's pattern), a region (two to four
// capitals), anything else in a rule's body or the data as a person's id.
// Numbers are amounts: the call's, the order's paid, and, where targeted,
// the totals, the ceiling and the approver's limit.
//
// Inputs are generated in tiers, most telling first, deduplicated, and
// cut at MaxCallInputs call inputs and MaxApproverInputs approver inputs
// (generate says how each tier is bounded so none crowds out the next):
//
//  1. the bases as they are: the logged inputs, then the gate's cases at
//     the reference's and the candidate's limits;
//  2. the combo of each rule body that only one bundle has (a changed
//     rule) applied to each base, then with one member replaced too;
//  3. each base with one member replaced by each value that can stand
//     there, round robin over the members, and each base in a workflow
//     within its bounds and one past each of them;
//  4. as 2 for the rule bodies both bundles have.

// Bounds on the generated inputs, so that a review costs a bounded time
// (see BenchmarkNewAllowances).
const (
	MaxCallInputs     = 2500
	MaxApproverInputs = 1000
	// MaxLogged is how many logged inputs (the most recent, distinct) are
	// taken as bases.
	MaxLogged = 100
)

// Shapes of untargeted string literals.
var (
	orderShape  = regexp.MustCompile(`^O-[0-9]{1,12}$`)
	regionShape = regexp.MustCompile(`^[A-Z]{2,4}$`)
	personShape = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$`)
)

// kind is what a member of an input holds, and so which literals can
// stand there.
type kind int

const (
	kindPerson kind = iota
	kindRegion
	kindRole
	kindOrder
	kindTool
	kindStatus
	kindMoney
	kindCount
	kindOther
)

// member is one place of an input a value can be put.
type member struct {
	path string
	kind kind
	// primary members take every value of their kind; the others only
	// the values targeted at them.
	primary bool
}

// The members of each input a value is put in, in the order their
// replacements are tried (the most decisive first).
var callMembers = []member{
	{"args.amount", kindMoney, true},
	{"tool", kindTool, true},
	{"user.id", kindPerson, true},
	{"args.order", kindOrder, true},
	{bothRegions, kindRegion, true},
	{"user.role", kindRole, true},
	{"order.status", kindStatus, true},
	{"order.paid", kindMoney, true},
	{"totals.order_reships", kindCount, true},
	{"user.region", kindRegion, true},
	{"order.region", kindRegion, true},
	{"user.refund_ceiling", kindMoney, false},
	{"order.customer", kindOther, false},
	{"totals.order_refunded", kindMoney, false},
	{"totals.rep_day", kindMoney, false},
	{"totals.agent_hour", kindMoney, false},
}

var approverMembers = []member{
	{"approver.role", kindRole, true},
	{"tool", kindTool, true},
	{"approver.region", kindRegion, true},
	{"requester.region", kindRegion, true},
	{"approver.id", kindPerson, true},
	{"requester.id", kindPerson, true},
	{"amount", kindMoney, true},
	{"approver.approve_limit", kindMoney, true},
}

// value is a literal: a string or a whole number.
type value struct {
	s     string
	n     int64
	isNum bool
}

func (v value) key() string {
	if v.isNum {
		return "n" + strconv.FormatInt(v.n, 10)
	}
	return "s" + v.s
}

func str(s string) value { return value{s: s} }
func num(n int64) value  { return value{n: n, isNum: true} }

// less orders numbers by value before strings, strings as bytes.
func less(a, b value) int {
	switch {
	case a.isNum && b.isNum:
		return cmp.Compare(a.n, b.n)
	case a.isNum:
		return -1
	case b.isNum:
		return 1
	}
	return strings.Compare(a.s, b.s)
}

// assignment puts a value in a member.
type assignment struct {
	path string
	v    value
}

// literals is what two bundles mention.
type literals struct {
	// targeted are the values compared with each input member.
	targeted map[string]map[string]value
	// combos are the assignments of one rule body each, in the order
	// first seen; sides says which bundles have the body (1 the
	// reference, 2 the candidate), so the bodies only one has, the
	// changed rules, come first.
	combos []combo
	// strs are the strings outside rule heads and in the data; nums
	// every whole number of the rules, dataNums of the data (the limits,
	// the boundaries that matter most).
	strs     map[string]value
	nums     map[string]value
	dataNums map[string]value
}

// combo is what one rule body targets.
type combo struct {
	body    string
	assigns []assignment
	sides   int
}

func newLiterals() *literals {
	return &literals{targeted: map[string]map[string]value{}, strs: map[string]value{}, nums: map[string]value{}, dataNums: map[string]value{}}
}

// addBundle reads the literals of b's policy modules and data; side is
// 1 for the reference, 2 for the candidate.
func (l *literals) addBundle(b *policy.Bundle, side int) {
	for _, m := range b.Modules() {
		if !m.Test {
			l.addModule(m.Parsed(), side)
		}
	}
	d := json.NewDecoder(bytes.NewReader(b.Data()))
	d.UseNumber()
	var data any
	if d.Decode(&data) == nil {
		l.addData(data)
	}
}

func (l *literals) addModule(m *ast.Module, side int) {
	heads := map[string]bool{}
	for _, r := range m.Rules {
		for e := r; e != nil; e = e.Else {
			ast.WalkTerms(e.Head, func(t *ast.Term) bool {
				if s, ok := t.Value.(ast.String); ok {
					heads[string(s)] = true
				}
				return false
			})
		}
	}
	var walk func(t *ast.Term) bool
	walk = func(t *ast.Term) bool {
		switch v := t.Value.(type) {
		case ast.Ref:
			// input.user.id is input["user"]["id"]: its keys are
			// not literals anyone compares with.
			for _, part := range v {
				if _, key := part.Value.(ast.String); !key {
					ast.WalkTerms(part, walk)
				}
			}
			return true
		case ast.String:
			if !heads[string(v)] {
				l.strs[str(string(v)).key()] = str(string(v))
			}
		case ast.Number:
			if n, ok := v.Int64(); ok {
				l.nums[num(n).key()] = num(n)
			}
		}
		return false
	}
	for _, r := range m.Rules { // not the package's path or the imports
		ast.WalkTerms(r, walk)
	}
	ast.WalkBodies(m, func(b ast.Body) bool {
		var assigns []assignment
		for _, e := range b {
			assigns = append(assigns, targets(e)...)
		}
		for _, a := range assigns {
			if l.targeted[a.path] == nil {
				l.targeted[a.path] = map[string]value{}
			}
			l.targeted[a.path][a.v.key()] = a.v
		}
		if len(assigns) == 0 {
			return false
		}
		key := b.String()
		i := slices.IndexFunc(l.combos, func(c combo) bool { return c.body == key })
		if i < 0 {
			l.combos = append(l.combos, combo{body: key, assigns: assigns})
			i = len(l.combos) - 1
		}
		l.combos[i].sides |= side
		return false
	})
}

// targets are the assignments one expression implies: a call (==, !=,
// <, in ...) between one input member and literals.
func targets(e *ast.Expr) []assignment {
	if !e.IsCall() {
		return nil
	}
	var path string
	var vals []value
	for _, op := range e.Operands() {
		if p, ok := inputPath(op); ok {
			if path != "" {
				return nil // two members compared with each other
			}
			path = p
			continue
		}
		vals = append(vals, scalars(op)...)
	}
	if path == "" {
		return nil
	}
	out := make([]assignment, len(vals))
	for i, v := range vals {
		out[i] = assignment{path: path, v: v}
	}
	return out
}

// inputPath is "user.id" for the term input.user.id.
func inputPath(t *ast.Term) (string, bool) {
	ref, ok := t.Value.(ast.Ref)
	if !ok || len(ref) < 2 || !ref[0].Equal(ast.InputRootDocument) {
		return "", false
	}
	parts := make([]string, 0, len(ref)-1)
	for _, p := range ref[1:] {
		s, ok := p.Value.(ast.String)
		if !ok {
			return "", false
		}
		parts = append(parts, string(s))
	}
	return strings.Join(parts, "."), true
}

// scalars are the literal strings and whole numbers of a term: itself, or
// the members of a set or array of them.
func scalars(t *ast.Term) []value {
	switch v := t.Value.(type) {
	case ast.String:
		return []value{str(string(v))}
	case ast.Number:
		if n, ok := v.Int64(); ok {
			return []value{num(n)}
		}
	case ast.Set:
		var out []value
		for _, x := range v.Slice() {
			out = append(out, scalars(x)...)
		}
		return out
	case *ast.Array:
		var out []value
		for i := range v.Len() {
			out = append(out, scalars(v.Elem(i))...)
		}
		return out
	}
	return nil
}

func (l *literals) addData(v any) {
	switch x := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			l.addData(x[k])
		}
	case []any:
		for _, e := range x {
			l.addData(e)
		}
	case string:
		l.strs[str(x).key()] = str(x)
	case json.Number:
		if n, err := x.Int64(); err == nil {
			l.dataNums[num(n).key()] = num(n)
		}
	}
}

// pools are the values each kind of member can take, the most telling
// first.
type pools map[kind][]value

// Bounds on a pool: each value of a primary member's kind makes an input
// of each base.
const (
	maxPool      = 24
	maxMoneyPool = 64
)

// poolsOf sorts the literals into kinds, most telling first: the values
// the rules compare with a member of that kind; the bundles' other
// literals of its shape (amounts: every whole number above zero, a cent
// either side); the API's roles and tools; and the values the bases hold.
func poolsOf(l *literals, kinds map[string]kind, seen map[kind][]value) pools {
	out := pools{}
	add := func(k kind, vs ...value) {
		limit := maxPool
		if k == kindMoney {
			limit = maxMoneyPool
		}
		for _, v := range vs {
			if len(out[k]) < limit && !slices.Contains(out[k], v) {
				out[k] = append(out[k], v)
			}
		}
	}
	targetedAt := map[kind][]value{}
	for _, path := range slices.Sorted(maps.Keys(l.targeted)) {
		k, ok := kinds[path]
		if !ok {
			continue
		}
		for _, v := range slices.SortedFunc(maps.Values(l.targeted[path]), less) {
			if v.isNum == (k == kindMoney || k == kindCount) {
				targetedAt[k] = append(targetedAt[k], v)
			}
		}
	}
	for k, vs := range targetedAt {
		if k == kindMoney {
			vs = aCentEitherSide(vs)
		}
		add(k, vs...)
	}
	targetedElsewhere := map[string]bool{}
	for _, vs := range l.targeted {
		for key := range vs {
			targetedElsewhere[key] = true
		}
	}
	for _, v := range slices.SortedFunc(maps.Values(l.strs), less) {
		switch {
		case orderShape.MatchString(v.s):
			add(kindOrder, v)
		case regionShape.MatchString(v.s):
			add(kindRegion, v)
		case personShape.MatchString(v.s) && !targetedElsewhere[v.key()] && !isAPIWord(v.s):
			add(kindPerson, v)
		}
	}
	dataNums, nums := slices.SortedFunc(maps.Values(l.dataNums), less), slices.SortedFunc(maps.Values(l.nums), less)
	add(kindMoney, aCentEitherSide(dataNums)...)
	add(kindMoney, aCentEitherSide(nums)...)
	for _, v := range nums {
		if v.n >= 0 && v.n <= 10 {
			add(kindCount, v)
		}
	}
	for _, r := range roles {
		add(kindRole, str(r))
	}
	for _, s := range tool.All() {
		add(kindTool, str(string(s.Name)))
	}
	for _, k := range slices.Sorted(maps.Keys(seen)) {
		add(k, seen[k]...)
	}
	return out
}

// roles are the API's roles (a token's role claim).
var roles = []string{"rep", "lead", "operator"}

// isAPIWord reports whether s is a role or a tool: such words are not
// taken for a person's id.
func isAPIWord(s string) bool {
	if slices.Contains(roles, s) {
		return true
	}
	_, ok := tool.Lookup(tool.Name(s))
	return ok
}

// aCentEitherSide is each whole number above zero and at most
// tool.MaxAmount, with the numbers a cent below and above it.
func aCentEitherSide(vs []value) []value {
	var out []value
	for _, v := range vs {
		for _, n := range []int64{v.n, v.n - 1, v.n + 1} {
			if n > 0 && n <= tool.MaxAmount {
				out = append(out, num(n))
			}
		}
	}
	return out
}

func kindsOf(members ...[]member) map[string]kind {
	out := map[string]kind{"order.id": kindOrder}
	for _, ms := range members {
		for _, m := range ms {
			out[m.path] = m.kind
		}
	}
	return out
}

// variants expands a combo: every targeted number also a cent either
// side, one value per member at a time; at most maxVariants of them.
func variants(combo []assignment) [][]assignment {
	const maxVariants = 27
	byPath := map[string][]value{}
	var paths []string
	for _, a := range combo {
		if _, ok := byPath[a.path]; !ok {
			paths = append(paths, a.path)
		}
		vals := []value{a.v}
		if a.v.isNum {
			vals = []value{num(a.v.n - 1), a.v, num(a.v.n + 1)}
		}
		for _, v := range vals {
			if !slices.ContainsFunc(byPath[a.path], func(x value) bool { return x == v }) {
				byPath[a.path] = append(byPath[a.path], v)
			}
		}
	}
	slices.Sort(paths)
	out := [][]assignment{nil}
	for _, p := range paths {
		var next [][]assignment
		for _, prefix := range out {
			for _, v := range byPath[p] {
				if len(next) == maxVariants {
					break
				}
				next = append(next, append(slices.Clip(prefix), assignment{path: p, v: v}))
			}
		}
		out = next
	}
	return out
}

// variants are the combos expanded (see variants), each once: those of
// the rule bodies only one bundle has (changed), then the others.
func (l *literals) variants() (changed, shared [][]assignment) {
	seen := map[string]bool{}
	for _, c := range l.combos {
		for _, v := range variants(c.assigns) {
			var key strings.Builder
			for _, a := range v {
				key.WriteString(a.path + "=" + a.v.key() + "\x00")
			}
			if seen[key.String()] {
				continue
			}
			seen[key.String()] = true
			if c.sides == 3 {
				shared = append(shared, v)
			} else {
				changed = append(changed, v)
			}
		}
	}
	return changed, shared
}

// seenIn are the values the bases hold in members of each kind, in the
// bases' order.
func seenIn(calls []policy.Input, approvals []policy.ApproverInput) map[kind][]value {
	out := map[kind][]value{}
	add := func(k kind, s string) {
		if s != "" && !slices.Contains(out[k], str(s)) {
			out[k] = append(out[k], str(s))
		}
	}
	for _, in := range calls {
		add(kindTool, string(in.Tool))
		add(kindOrder, in.Args.Order)
		if u := in.User; u != nil {
			add(kindPerson, u.ID)
			add(kindRegion, u.Region)
		}
		if o := in.Order; o != nil {
			add(kindRegion, o.Region)
			add(kindStatus, o.Status)
		}
	}
	for _, in := range approvals {
		add(kindPerson, in.Approver.ID)
		add(kindPerson, in.Requester.ID)
		add(kindRegion, in.Approver.Region)
		add(kindRegion, in.Requester.Region)
	}
	return out
}

// orderBook is the order records the bases hold, by id: an input that
// names one of those orders gets its record, as the engine would read it
// from the order system.
type orderBook map[string]policy.Order

func orderBookOf(bases []policy.Input) orderBook {
	out := orderBook{}
	for _, in := range bases {
		if o := in.Order; o != nil && o.ID == in.Args.Order {
			if _, ok := out[o.ID]; !ok {
				out[o.ID] = *o
			}
		}
	}
	return out
}

// setCall puts v in member path of in, which it copies first; false when
// in has no such member or v does not fit it. An order id the book knows
// brings its record.
func (book orderBook) setCall(in policy.Input, a assignment) (policy.Input, bool) {
	in = copyInput(in)
	s, n := a.v.s, money.Cents(a.v.n)
	text, number := !a.v.isNum, a.v.isNum
	switch a.path {
	case "user.id", "user.role", "user.region", "user.refund_ceiling":
		if in.User == nil {
			return in, false
		}
		switch {
		case a.path == "user.id" && text:
			in.User.ID = s
		case a.path == "user.role" && text:
			in.User.Role = s
		case a.path == "user.region" && text:
			in.User.Region = s
		case a.path == "user.refund_ceiling" && number:
			in.User.RefundCeiling = n
		default:
			return in, false
		}
	case "tool":
		in.Tool = tool.Name(s)
		return in, text
	case bothRegions:
		if in.User == nil || in.Order == nil || !text {
			return in, false
		}
		in.User.Region, in.Order.Region = s, s
	case "args.order", "order.id":
		if !text {
			return in, false
		}
		in.Args.Order = s
		switch o, ok := book[s]; {
		case ok && in.Order != nil:
			o.Lines = slices.Clone(o.Lines)
			in.Order = &o
		case in.Order != nil:
			in.Order.ID = s
		}
	case "args.amount":
		in.Args.Amount = n
		return in, number
	case "order.region", "order.paid", "order.status", "order.customer":
		if in.Order == nil {
			return in, false
		}
		switch {
		case a.path == "order.region" && text:
			in.Order.Region = s
		case a.path == "order.paid" && number:
			in.Order.Paid = n
		case a.path == "order.status" && text:
			in.Order.Status = s
		case a.path == "order.customer" && text:
			in.Order.Customer = s
		default:
			return in, false
		}
	case "totals.order_refunded":
		in.Totals.OrderRefunded = n
		return in, number
	case "totals.rep_day":
		in.Totals.RepDay = n
		return in, number
	case "totals.agent_hour":
		in.Totals.AgentHour = n
		return in, number
	case "totals.order_reships":
		in.Totals.OrderReships = int(a.v.n)
		return in, number
	default:
		return in, false
	}
	return in, true
}

func copyInput(in policy.Input) policy.Input {
	if in.User != nil {
		u := *in.User
		u.Scopes = slices.Clone(u.Scopes)
		in.User = &u
	}
	if in.Order != nil {
		o := *in.Order
		o.Lines = slices.Clone(o.Lines)
		in.Order = &o
	}
	if in.Workflow != nil {
		w := *in.Workflow
		in.Workflow = &w
	}
	return in
}

// setApprover puts v in member path of in; false when it does not fit.
func setApprover(in policy.ApproverInput, a assignment) (policy.ApproverInput, bool) {
	s, n := a.v.s, money.Cents(a.v.n)
	text := !a.v.isNum
	switch a.path {
	case "approver.id":
		in.Approver.ID = s
	case "approver.role":
		in.Approver.Role = s
	case "approver.region":
		in.Approver.Region = s
	case "requester.id":
		in.Requester.ID = s
	case "requester.region":
		in.Requester.Region = s
	case "tool":
		in.Tool = tool.Name(s)
	case "approver.approve_limit":
		in.Approver.ApproveLimit = n
		return in, !text
	case "amount":
		in.Amount = n
		return in, !text
	default:
		return in, false
	}
	return in, text
}

// bothRegions is both the rep's and the order's region set to one value:
// the common case of a rep working in their own region.
const bothRegions = "user.region+order.region"

// callInputs generates the call inputs: the tiers of the package comment.
func callInputs(l *literals, p pools, bases []policy.Input, bounds []policy.Bounds, limit int) []policy.Input {
	g := newSet[policy.Input](limit, callKey)
	workflows := func(in policy.Input) []policy.Input {
		var out []policy.Input
		for _, w := range runs(bounds) {
			next := copyInput(in)
			next.Workflow = &w
			out = append(out, next)
		}
		return out
	}
	generate(g, l, singlesOf(callMembers, l, p), bases, orderBookOf(bases).setCall, workflows)
	return g.items
}

// approverInputs generates the approver inputs, in the same tiers.
func approverInputs(l *literals, p pools, bases []policy.ApproverInput, limit int) []policy.ApproverInput {
	g := newSet[policy.ApproverInput](limit, approverKey)
	generate(g, l, singlesOf(approverMembers, l, p), bases, setApprover, nil)
	return g.items
}

// generate adds to g, until it is full, the bases and their variations,
// most telling first:
//
//  1. the bases;
//  2. each changed rule body's combo applied to each base;
//  3. each changed combo, then one member replaced, in each base;
//  4. one member replaced in each base, and more(base);
//  5. and 6. as 2 and 3 for the rule bodies both bundles have.
//
// Tiers 2 and 3 stop at half of g's room, 4 at nine tenths, so that no
// tier crowds out the next. Each tier tries every base with one variation
// before any base with the next.
func generate[T any](g *set[T], l *literals, singles [][]assignment, bases []T, set func(T, assignment) (T, bool), more func(T) []T) {
	apply := func(in T, as ...[]assignment) (T, bool) {
		for _, a := range as {
			changed := false
			for _, x := range a {
				if next, ok := set(in, x); ok {
					in, changed = next, true
				}
			}
			if !changed {
				return in, false
			}
		}
		return in, true
	}
	limit := g.limit
	withCombos := func(combos [][]assignment) {
		for _, c := range combos {
			for _, b := range bases {
				if in, ok := apply(b, c); ok {
					g.add(in)
				}
			}
		}
		for _, s := range singles {
			for _, c := range combos {
				for _, b := range bases {
					if g.full() {
						return
					}
					if in, ok := apply(b, c, s); ok {
						g.add(in)
					}
				}
			}
		}
	}
	for _, b := range bases {
		g.add(b)
	}
	changed, shared := l.variants()
	g.limit = min(limit, len(g.items)+limit/2)
	withCombos(changed)
	g.limit = limit * 9 / 10
	if more != nil {
		for _, b := range bases {
			for _, in := range more(b) {
				g.add(in)
			}
		}
	}
	for _, s := range singles {
		for _, b := range bases {
			if g.full() {
				break
			}
			if in, ok := apply(b, s); ok {
				g.add(in)
			}
		}
	}
	g.limit = limit
	withCombos(shared)
}

// singlesOf are the one-member replacements: the values targeted at each
// member first, then, round robin over the members so that each gets its
// most telling values before any gets many, every value of a primary
// member's kind.
func singlesOf(members []member, l *literals, p pools) [][]assignment {
	var out [][]assignment
	seen := map[string]bool{}
	add := func(path string, v value) {
		if k := path + "=" + v.key(); !seen[k] {
			seen[k] = true
			out = append(out, []assignment{{path: path, v: v}})
		}
	}
	for _, m := range members {
		for _, v := range slices.SortedFunc(maps.Values(l.targeted[m.path]), less) {
			add(m.path, v)
		}
	}
	for i := 0; ; i++ {
		more := false
		for _, m := range members {
			if pool := p[m.kind]; m.primary && i < len(pool) {
				add(m.path, pool[i])
				more = true
			}
		}
		if !more {
			return out
		}
	}
}

// runs are where a workflow can stand against each bundle's bounds: well
// within them, and at one past each.
func runs(bounds []policy.Bounds) []policy.Run {
	var out []policy.Run
	for _, b := range bounds {
		within := policy.Run{Step: 1, MaxSteps: b.MaxSteps, MaxSpend: b.MaxSpend, Attempt: 1, MaxAttempts: b.MaxAttempts}
		out = append(out, within)
		past := within
		past.Step = b.MaxSteps + 1
		out = append(out, past)
		past = within
		past.Attempt = b.MaxAttempts + 1
		out = append(out, past)
		past = within
		past.Spent = b.MaxSpend
		out = append(out, past)
		past = within
		past.PastDeadline = true
		out = append(out, past)
	}
	return out
}

// set collects distinct inputs, by a key of every member, up to a limit.
type set[T any] struct {
	limit int
	seen  map[string]bool
	items []T
	key   func(T) string
}

func newSet[T any](limit int, key func(T) string) *set[T] {
	return &set[T]{limit: limit, seen: map[string]bool{}, key: key}
}

func (s *set[T]) full() bool { return len(s.items) >= s.limit }

func (s *set[T]) add(x T) {
	if s.full() {
		return
	}
	k := s.key(x)
	if s.seen[k] {
		return
	}
	s.seen[k] = true
	s.items = append(s.items, x)
}

// callKey and approverKey write every member of an input, so that two
// inputs the policy sees alike have one key. (policy.InputJSON would do,
// at several times the cost, for every input tried.)
func callKey(in policy.Input) string {
	var b strings.Builder
	w := func(xs ...any) {
		for _, x := range xs {
			fmt.Fprint(&b, x, "\x00")
		}
	}
	w(in.Tool, in.Args.Order, int64(in.Args.Amount), in.Args.Line, in.Args.Quantity,
		int64(in.Totals.OrderRefunded), int64(in.Totals.RepDay), int64(in.Totals.AgentHour), in.Totals.OrderReships)
	if u := in.User; u != nil {
		w("user", u.ID, u.Role, u.Region, strings.Join(u.Scopes, ","), int64(u.RefundCeiling))
	}
	if o := in.Order; o != nil {
		w("order", o.ID, o.Region, o.Customer, int64(o.Paid), o.Status)
		for _, l := range o.Lines {
			w(l.ID, l.SKU, l.Description, int64(l.UnitAmount), l.Quantity, l.RefundedQuantity)
		}
	}
	if r := in.Workflow; r != nil {
		w("workflow", *r)
	}
	return b.String()
}

func approverKey(in policy.ApproverInput) string {
	return fmt.Sprint(in.Approver, "\x00", in.Requester, "\x00", in.Tool, "\x00", int64(in.Amount), "\x00", in.Expires.Unix(), "\x00", in.Now.Unix())
}
