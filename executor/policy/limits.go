package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/countersign/countersign/bundles"
	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/strictjson"
	"github.com/countersign/countersign/executor/tool"
)

// BaselineRevision is the release whose limits a candidate is compared
// with when no bundle is active (the first start of a sidecar, `bundle
// test`): the company's limits as first released.
const BaselineRevision = "p1"

// LimitChangeUndeclared is the Case of a gate failure for a limit whose
// value differs from the reference's without a declaration that matches.
const LimitChangeUndeclared = "limit_change_undeclared"

// LimitChange is a change of one limit that a bundle declares in its
// .manifest, metadata.limit_changes: [{"name", "from", "to"}]. Name is a
// name of the limit table: a key of data.countersign.limits, or
// "bounds.<member>" or "breaker.<member>" for a run bound or a breaker
// threshold; From and To are in its units (cents, seconds for the
// *_seconds limits, or a count). From is the active bundle's value, To
// the bundle's own.
type LimitChange struct {
	Name string `json:"name"`
	From int64  `json:"from"`
	To   int64  `json:"to"`
}

// Loosens reports whether the change lets more through: a higher auto
// limit, maximum, reshipment threshold, cap, run bound or breaker
// threshold, a longer approval or actor token life, or a shorter rolling
// window for the rep's cap or for the breaker (the same cap over less time
// lets more refunds through in a day; the same number of failures over
// less time trips the breaker later).
func (c LimitChange) Loosens() bool {
	if l, ok := tableLimit(c.Name); ok && c.From != c.To {
		return l.shorterLoosens == (c.To < c.From)
	}
	return false
}

func (c LimitChange) String() string { return fmt.Sprintf("%s %d → %d", c.Name, c.From, c.To) }

// Flag is the change as `bundle build` declares it:
// --limit-change NAME:FROM:TO.
func (c LimitChange) Flag() string {
	return fmt.Sprintf("--limit-change %s:%d:%d", c.Name, c.From, c.To)
}

// Declarations compares the limit changes b declares with ref, as the gate
// does: failures are the gate's limit_change_undeclared results (none when
// b declares exactly what it changes), and want is every change b makes
// against ref, each as it must be declared; declaring exactly want clears
// the failures. Authoring tools name want before a bundle reaches a gate.
func Declarations(b, ref *Bundle) (failures []CaseResult, want []LimitChange) {
	return limitFailures(ref.figures, b.figures, b.changes), changesBetween(ref.figures, b.figures)
}

// limit is one number of a bundle's data that the gate knows the meaning
// of: a member of data.countersign.limits, or of the optional
// data.countersign.bounds and data.countersign.breaker.
type limit struct {
	// name is how a declaration names it: the member's key for a limit
	// ("refund_auto"), "<object>.<key>" for a bound or the breaker
	// ("bounds.max_steps").
	name string
	// value reads a limit from Limits; nil for a bound or the breaker,
	// which Limits does not hold (an absent one has a default, and a
	// change from or to a default is a data key added or removed).
	value func(Limits) int64
	// shorterLoosens is set for the numbers that a lower value loosens:
	// the windows over which a cap or the breaker counts.
	shorterLoosens bool
}

// path is where the limit is in the bundle's data.
func (l limit) path() []string {
	object, key, ok := strings.Cut(l.name, ".")
	if !ok {
		return []string{"countersign", "limits", l.name}
	}
	return []string{"countersign", object, key}
}

// limitTable lists the limits in data.json's order, then the bounds of a
// run and the breaker's thresholds. A lower number tightens each of them
// but the windows: fewer steps, less spent, an earlier deadline, fewer
// attempts, fewer failures before the breaker trips; a longer window
// counts more refunds against the rep's cap and more failures against the
// breaker.
var limitTable = [...]limit{
	{name: "refund_auto", value: func(l Limits) int64 { return int64(l.RefundAuto) }},
	{name: "refund_max", value: func(l Limits) int64 { return int64(l.RefundMax) }},
	{name: "reship_approval_value", value: func(l Limits) int64 { return int64(l.ReshipApprovalValue) }},
	{name: "rep_daily", value: func(l Limits) int64 { return int64(l.RepDaily) }},
	{name: "rep_window_seconds", value: func(l Limits) int64 { return int64(l.RepWindow / time.Second) }, shorterLoosens: true},
	{name: "agent_hourly", value: func(l Limits) int64 { return int64(l.AgentHourly) }},
	{name: "approval_ttl_seconds", value: func(l Limits) int64 { return int64(l.ApprovalTTL / time.Second) }},
	{name: "token_ttl_seconds", value: func(l Limits) int64 { return int64(l.TokenTTL / time.Second) }},
	{name: "bounds.max_steps"},
	{name: "bounds.max_spend"},
	{name: "bounds.deadline_seconds"},
	{name: "bounds.max_attempts"},
	{name: "breaker.max_failures"},
	{name: "breaker.window_seconds", shorterLoosens: true},
}

// tableLimit returns the limit a declaration names.
func tableLimit(name string) (limit, bool) {
	for _, l := range limitTable {
		if l.name == name {
			return l, true
		}
	}
	return limit{}, false
}

// figures are the numbers of the limit table that a bundle holds, by
// name: every limit, and the bounds and breaker members its data sets.
type figures map[string]int64

// figuresOf reads the table's numbers from a bundle's data, which its
// decoding has already checked (whole numbers above zero).
func figuresOf(data map[string]any) figures {
	out := figures{}
	for _, l := range limitTable {
		var v any = data
		for _, key := range l.path() {
			obj, _ := v.(map[string]any)
			v = obj[key]
		}
		if n, ok := wholePositive(v); ok {
			out[l.name] = n
		}
	}
	return out
}

// limitFigures are the figures of a reference known only by its limits:
// no bounds and no breaker set.
func limitFigures(l Limits) figures {
	out := figures{}
	for _, m := range limitTable {
		if m.value != nil {
			out[m.name] = m.value(l)
		}
	}
	return out
}

// MarshalJSON writes the limits as data.countersign.limits holds them.
func (l Limits) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range limitTable {
		if m.value == nil {
			break // the bounds and the breaker follow the limits
		}
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q:%d", m.name, m.value(l))
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// BaselineLimits are the limits of the embedded release BaselineRevision.
func BaselineLimits() (Limits, error) {
	archive, err := bundles.Archive(BaselineRevision)
	if err != nil {
		return Limits{}, fmt.Errorf("policy: baseline limits: %w", err)
	}
	lim, err := ArchiveLimits(archive)
	if err != nil {
		return Limits{}, fmt.Errorf("policy: baseline limits: %w", err)
	}
	return lim, nil
}

// ArchiveLimits reads the limits of a bundle archive without compiling
// its policy: what a reader of old decisions needs of the bundle that
// made them (LoadArchive compiles and prepares every query).
func ArchiveLimits(archive []byte) (Limits, error) {
	if err := scanArchive(archive); err != nil {
		return Limits{}, err
	}
	raw, err := readBundle(archive)
	if err != nil {
		return Limits{}, err
	}
	return decodeLimits(raw.Data)
}

// Baseline is the embedded release BaselineRevision: what a candidate is
// compared with when no bundle is active. It is loaded once per process: a
// Bundle is immutable and safe to share.
func Baseline() (*Bundle, error) { return baseline() }

var baseline = sync.OnceValues(func() (*Bundle, error) {
	archive, err := bundles.Archive(BaselineRevision)
	if err != nil {
		return nil, fmt.Errorf("policy: baseline: %w", err)
	}
	b, err := LoadArchive(archive)
	if err != nil {
		return nil, fmt.Errorf("policy: baseline: %w", err)
	}
	return b, nil
})

// decodeLimitChanges reads metadata.limit_changes of a bundle's .manifest
// and checks each declaration against the bundle's own figures: a number
// of the limit table that the bundle holds, declared once, a change (from
// differs from to), whose to is the bundle's value. Every problem is
// reported at once.
func decodeLimitChanges(metadata map[string]any, own figures) ([]LimitChange, error) {
	v, ok := metadata["limit_changes"]
	if !ok {
		return nil, nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: .manifest metadata.limit_changes: %v", ErrInvalidBundle, err)
	}
	var changes []LimitChange
	if err := strictjson.Decode(raw, &changes); err != nil {
		return nil, fmt.Errorf(`%w: .manifest metadata.limit_changes must be a list of {"name", "from", "to"} with whole numbers: %v`, ErrInvalidBundle, err)
	}
	seen := map[string]bool{}
	var problems []string
	for _, c := range changes {
		l, known := tableLimit(c.Name)
		value, held := own[c.Name]
		switch {
		case !known:
			problems = append(problems, fmt.Sprintf("%q is not a limit (the limit table has %s)", c.Name, strings.Join(limitNames(), ", ")))
		case seen[c.Name]:
			problems = append(problems, c.Name+" is declared twice")
		case c.From == c.To:
			problems = append(problems, fmt.Sprintf("%s declares no change (from and to are both %d); remove it", c.Name, c.To))
		case !held:
			problems = append(problems, fmt.Sprintf("%s is declared, but the bundle's data has no data.%s: a bound or breaker threshold "+
				"set or removed is a data key added or removed, not a change to declare (a second operator approves it)", c.Name, strings.Join(l.path(), ".")))
		case c.To != value:
			problems = append(problems, fmt.Sprintf("%s declares to %d, but the bundle's data holds %d", c.Name, c.To, value))
		}
		seen[c.Name] = true
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%w: .manifest metadata.limit_changes: %s", ErrInvalidBundle, strings.Join(problems, "; "))
	}
	return changes, nil
}

func limitNames() []string {
	out := make([]string, len(limitTable))
	for i, l := range limitTable {
		out[i] = l.name
	}
	return out
}

// limitFailures compares a candidate's figures with the reference's. Every
// number of the table that both hold and that differs must be declared
// with from the reference's value (to is checked at load); a declaration
// of one that does not differ is wrong too. Each such number is one
// failure, in table order: Expected is it at the reference's value, Got at
// the candidate's, with what the candidate declared. A bound or breaker
// threshold that only one of them sets is not compared here: it is a data
// key added or removed, which needs a second operator (see Compare).
func limitFailures(reference, own figures, declared []LimitChange) []CaseResult {
	byName := map[string]LimitChange{}
	for _, c := range declared {
		byName[c.Name] = c
	}
	var out []CaseResult
	for _, l := range limitTable {
		from, inReference := reference[l.name]
		to, inOwn := own[l.name]
		c, ok := byName[l.name]
		if !inReference || !inOwn || ok && c.From == from || !ok && from == to {
			continue
		}
		got := l.name + " " + strconv.FormatInt(to, 10) + " (undeclared)"
		if ok {
			got = fmt.Sprintf("%s %d (declared from %d)", l.name, to, c.From)
		}
		out = append(out, CaseResult{Case: LimitChangeUndeclared, Expected: l.name + " " + strconv.FormatInt(from, 10), Got: got})
	}
	return out
}

// changesBetween lists every number of the table that both figures hold
// and that differs: the changes a rollback declares.
func changesBetween(reference, own figures) []LimitChange {
	var out []LimitChange
	for _, l := range limitTable {
		from, inReference := reference[l.name]
		to, inOwn := own[l.name]
		if inReference && inOwn && from != to {
			out = append(out, LimitChange{Name: l.name, From: from, To: to})
		}
	}
	return out
}

// DefaultBreaker is the breaker of a bundle whose data has no
// data.countersign.breaker: five semantic failures of one tool by one
// agent version within ten minutes trip it.
var DefaultBreaker = BreakerLimits{Window: 10 * time.Minute, MaxFailures: 5}

// DefaultBounds are the members of data.countersign.bounds a bundle
// leaves out: 200 steps, a day, 10 attempts per step; an absent max_spend
// is the bundle's rep_daily limit (a run may spend at most what its rep
// may in a day), so it is not here.
var DefaultBounds = Bounds{MaxSteps: 200, Deadline: 24 * time.Hour, MaxAttempts: 10}

// boundKeys are the members of data.countersign.bounds.
var boundKeys = []string{"max_steps", "max_spend", "deadline_seconds", "max_attempts"}

// decodeAutonomy reads the optional data.countersign.modes ({"<tool>":
// "shadow"|"approval_only"|"auto"}), data.countersign.breaker
// ({"window_seconds", "max_failures"}) and data.countersign.bounds
// ({"max_steps", "max_spend", "deadline_seconds", "max_attempts"}), each
// member optional, reporting every problem at once. lim gives the default
// max_spend.
func decodeAutonomy(data map[string]any, lim Limits) (Autonomy, error) {
	cs, _ := data["countersign"].(map[string]any)
	var problems []string
	modes := map[tool.Name]Mode{}
	if v, ok := cs["modes"]; ok {
		raw, ok := v.(map[string]any)
		if !ok {
			problems = append(problems, `modes must be an object {"<tool>": "shadow"|"approval_only"|"auto"}`)
		}
		for name, m := range raw {
			s, _ := m.(string)
			switch {
			case !validTool(tool.Name(name)):
				problems = append(problems, fmt.Sprintf("modes: %q is not a tool", name))
			case !Mode(s).Valid():
				problems = append(problems, fmt.Sprintf("modes: %s must be shadow, approval_only or auto, got %v", name, m))
			default:
				modes[tool.Name(name)] = Mode(s)
			}
		}
	}
	b := DefaultBreaker
	if v, ok := cs["breaker"]; ok {
		raw, ok := v.(map[string]any)
		if !ok {
			problems = append(problems, `breaker must be an object {"window_seconds", "max_failures"}`)
		}
		for key, x := range raw {
			n, ok := wholePositive(x)
			switch {
			case key != "window_seconds" && key != "max_failures":
				problems = append(problems, fmt.Sprintf("breaker: unknown member %q (window_seconds, max_failures)", key))
			case !ok || n > math.MaxInt32:
				problems = append(problems, fmt.Sprintf("breaker: %s must be a whole number above zero, got %v", key, x))
			case key == "window_seconds":
				b.Window = time.Duration(n) * time.Second
			default:
				b.MaxFailures = int(n)
			}
		}
	}
	bounds, bp := decodeBounds(cs, lim)
	problems = append(problems, bp...)
	if len(problems) > 0 {
		slices.Sort(problems) // map order would shuffle them
		return Autonomy{}, fmt.Errorf("%w: data.countersign: %s", ErrInvalidBundle, strings.Join(problems, "; "))
	}
	return Autonomy{Modes: modes, Breaker: b, Bounds: bounds}, nil
}

// decodeBounds reads data.countersign.bounds from cs, each member a whole
// number above zero, returning the problems it found.
func decodeBounds(cs map[string]any, lim Limits) (Bounds, []string) {
	b := DefaultBounds
	b.MaxSpend = lim.RepDaily
	v, ok := cs["bounds"]
	if !ok {
		return b, nil
	}
	raw, ok := v.(map[string]any)
	if !ok {
		return b, []string{`bounds must be an object {"max_steps", "max_spend", "deadline_seconds", "max_attempts"}`}
	}
	var problems []string
	for key, x := range raw {
		n, ok := wholePositive(x)
		switch {
		case !slices.Contains(boundKeys, key):
			problems = append(problems, fmt.Sprintf("bounds: unknown member %q (%s)", key, strings.Join(boundKeys, ", ")))
		case !ok || n > math.MaxInt32 && key != "max_spend" || n > int64(tool.MaxAmount):
			problems = append(problems, fmt.Sprintf("bounds: %s must be a whole number above zero, got %v", key, x))
		case key == "max_steps":
			b.MaxSteps = int(n)
		case key == "max_spend":
			b.MaxSpend = money.Cents(n)
		case key == "deadline_seconds":
			b.Deadline = time.Duration(n) * time.Second
		default:
			b.MaxAttempts = int(n)
		}
	}
	return b, problems
}

func validTool(name tool.Name) bool {
	_, ok := tool.Lookup(name)
	return ok
}
