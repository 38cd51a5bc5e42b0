package engine_test

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/rego"

	"github.com/countersign/countersign/bundles"
	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

// decisionInputs reach every rule of the call policy under p1's limits.
// All but the first are decided at a time with a fraction of a second,
// and their orders are dated (placed, and shipped when they are); the
// first is an input recorded before inputs carried the time.
func decisionInputs() []policy.Input {
	ana := func() *policy.User {
		return &policy.User{ID: "rep-ana", Role: "rep", Region: "EU", Scopes: []string{"lookup", "refund", "reship"}, RefundCeiling: 50000}
	}
	now := time.Date(2026, 12, 2, 9, 30, 15, 123456789, time.UTC)
	order := func(paid money.Cents, status string) *policy.Order {
		o := &policy.Order{ID: "O-1001", Region: "EU", Customer: "customer-1", Paid: paid, Status: status, PlacedAt: now.AddDate(0, 0, -12)}
		if status == "shipped" {
			o.ShippedAt = now.AddDate(0, 0, -10).Add(-time.Hour)
		}
		return o
	}
	refund := func(amount money.Cents) tool.Args { return tool.Args{Order: "O-1001", Amount: amount} }
	reship := tool.Args{Order: "O-1001"}
	noScopes := ana()
	noScopes.Scopes = nil
	usOrder := order(12000, "shipped")
	usOrder.Region = "US"
	out := []policy.Input{
		{Tool: tool.IssueRefund, Args: refund(3000), Order: order(12000, "shipped")},                 // R0
		{User: ana(), Tool: "delete_order", Args: refund(3000), Order: order(12000, "shipped")},      // default-deny
		{User: noScopes, Tool: tool.IssueRefund, Args: refund(3000), Order: order(12000, "shipped")}, // R1
		{User: ana(), Tool: tool.IssueRefund, Args: refund(3000)},                                    // R2, no order
		{User: ana(), Tool: tool.IssueRefund, Args: refund(3000), Order: usOrder},                    // R2
		{User: ana(), Tool: tool.IssueRefund, Args: refund(60000), Order: order(90000, "shipped")},   // R3
		{User: ana(), Tool: tool.IssueRefund, Args: refund(15000), Order: order(12000, "shipped")},   // R4
		{User: ana(), Tool: tool.IssueRefund, Args: refund(3000), Order: order(12000, "shipped"), // R5
			Totals: policy.Totals{RepDay: 99000}},
		{User: ana(), Tool: tool.IssueRefund, Args: refund(3000), Order: order(12000, "shipped"), // R6
			Totals: policy.Totals{AgentHour: 299000}},
		{User: ana(), Tool: tool.IssueRefund, Args: refund(3000), Order: order(12000, "shipped"), // R7, cumulative
			Totals: policy.Totals{OrderRefunded: 4000}},
		{User: ana(), Tool: tool.IssueRefund, Args: refund(3000), Order: order(12000, "shipped")},                                   // ALLOW
		{User: ana(), Tool: tool.ReshipOrder, Args: reship, Order: order(12000, "paid")},                                            // R8
		{User: ana(), Tool: tool.ReshipOrder, Args: reship, Order: order(12000, "shipped"), Totals: policy.Totals{OrderReships: 1}}, // R10
		{User: ana(), Tool: tool.ReshipOrder, Args: reship, Order: order(12000, "shipped"), Totals: policy.Totals{OrderReships: 2}}, // R11
		{User: ana(), Tool: tool.ReshipOrder, Args: reship, Order: order(40000, "shipped")},                                         // R9
		{User: ana(), Tool: tool.ReshipOrder, Args: reship, Order: order(12000, "shipped")},                                         // ALLOW
		{User: ana(), Tool: tool.LookupOrder, Args: reship, Order: order(12000, "shipped")},                                         // ALLOW
	}
	for i := range out[1:] {
		out[i+1].Now = now
	}
	out[0].Order.PlacedAt, out[0].Order.ShippedAt = time.Time{}, time.Time{}
	return out
}

// The input the decision log records is the document the policy
// evaluated, member for member: a bundle whose rule echoes its input
// (json.marshal(input)) shows what the policy engine hands OPA, and it is
// the recorded JSON.
func TestRecordedInputIsTheDocumentThePolicySees(t *testing.T) {
	fsys, err := bundles.Variant("p1", "echo", func(string) string {
		return "package countersign.call\n\ndecision := {\"decision\": \"ALLOW\", \"rule\": json.marshal(input)}\n"
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := policy.LoadFS(fsys)
	if err != nil {
		t.Fatal(err)
	}
	echo := policy.New(policy.Options{Timeout: 5 * time.Second})
	if err := echo.Restore(b); err != nil {
		t.Fatal(err)
	}
	for _, in := range decisionInputs() {
		res, err := echo.Decide(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := engine.MarshalInput(in)
		if err != nil {
			t.Fatal(err)
		}
		var seen, recorded any
		if err := json.Unmarshal([]byte(res.Rule), &seen); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, &recorded); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(recorded, seen) {
			t.Errorf("recorded %s\nthe policy saw %s", raw, res.Rule)
		}
	}
}

// A recorded decision replays in plain OPA: given the recorded input at
// the recorded path over the same bundle, OPA answers what countersign's
// policy engine answered, for inputs that reach every rule. The input reads
// back into the same Input, which is what a replay evaluates.
func TestRecordedInputReplaysInOPA(t *testing.T) {
	h := newHarness(t, engine.DefaultControls())
	ctx := context.Background()
	bundlePath := filepath.Join(t.TempDir(), "p1.tar.gz")
	if err := os.WriteFile(bundlePath, h.pol.Active().Archive(), 0o600); err != nil {
		t.Fatal(err)
	}
	query, err := rego.New(rego.Query("data."+strings.ReplaceAll(engine.DecisionPath, "/", ".")), rego.LoadBundle(bundlePath)).PrepareForEval(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rules := map[string]bool{}
	for _, in := range decisionInputs() {
		want, err := h.pol.Decide(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		rules[want.Rule] = true
		raw, err := engine.MarshalInput(in)
		if err != nil {
			t.Fatal(err)
		}
		var doc any
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatal(err)
		}
		rs, err := query.Eval(ctx, rego.EvalInput(doc))
		if err != nil || len(rs) != 1 {
			t.Fatalf("plain OPA on %s: %v, %d results", raw, err, len(rs))
		}
		got := rs[0].Expressions[0].Value
		if w := map[string]any{"decision": string(want.Decision), "rule": want.Rule}; !reflect.DeepEqual(got, w) {
			t.Errorf("input %s: plain OPA answers %v, the policy engine %v", raw, got, w)
		}
		back, err := engine.UnmarshalInput(raw)
		if in.User != nil && in.User.Scopes == nil {
			back.User.Scopes = nil // [] in the document, as the policy sees it
		}
		if err != nil || !reflect.DeepEqual(back, in) {
			t.Errorf("input %s reads back as %+v (%v), want %+v", raw, back, err, in)
		}
	}
	wantRules := []string{"R0-unknown-user", "R1-scope-not-delegated", "R10-order-already-reshipped", "R11-reship-limit",
		"R2-order-outside-region", "R3-refund-over-ceiling", "R4-exceeds-amount-paid", "R5-rep-daily-cap", "R6-agent-hourly-cap",
		"R7-refund-needs-approval", "R8-order-not-shipped", "R9-reship-needs-approval", "default-allow-after-checks", "default-deny"}
	if got := slices.Sorted(maps.Keys(rules)); !slices.Equal(got, wantRules) {
		t.Errorf("the inputs reached %v, want every rule %v", got, wantRules)
	}
}

func TestUnmarshalInputRefuses(t *testing.T) {
	for _, raw := range []string{
		`{"user": null, "tool": "issue_refund", "args": {"order": "O-1", "amount": 1}, "order": null, "totals": {}, "extra": 1}`,
		`{"tool": "issue_refund", "tool": "reship_order"}`,
		`{"args": {"order": "O-1", "amount": "100"}}`,
		`not json`,
	} {
		if _, err := engine.UnmarshalInput(json.RawMessage(raw)); err == nil {
			t.Errorf("UnmarshalInput(%s) succeeded", raw)
		}
	}
}

// Each decision is logged with a unique id, the path evaluated, the input
// the policy saw and the active bundle's revision and digest.
func TestDecisionsAreLoggedInOPAsShape(t *testing.T) {
	h := newHarness(t, engine.DefaultControls())
	rec := h.record()
	ctx := context.Background()
	h.workflow("rep-ana", "W1")
	var seen []policy.Input
	for _, args := range []string{`{"order":"O-1001","amount":3000}`, `{"order":"O-1002","amount":12000}`} {
		h.propose("rep-ana", "W1", tool.IssueRefund, args)
		seen = append(seen, rec.last())
	}
	page, err := h.eng.Decisions(ctx, store.DecisionFilter{Workflow: "W1"}, 10)
	if err != nil || len(page.Decisions) != 2 {
		t.Fatalf("decisions %+v, %v", page, err)
	}
	b := h.pol.Active()
	for i, d := range page.Decisions {
		e := engine.NewLogEntry(d)
		if e.DecisionID == "" || e.Path != "countersign/call/decision" || !e.Timestamp.Equal(h.clock.Now()) ||
			e.Timestamp.Location() != time.UTC || e.Bundles.Countersign != (engine.LogBundle{Revision: "p1", Digest: b.Digest()}) {
			t.Errorf("decision %d: %+v", i, e)
		}
		in, err := engine.UnmarshalInput(e.Input)
		if err != nil || !reflect.DeepEqual(in, seen[i]) {
			t.Errorf("decision %d recorded input %s, the policy saw %+v", i, e.Input, seen[i])
		}
		// The policy decided at the engine's time, and was told it.
		var doc struct {
			Now struct {
				RFC3339 string
				NS      int64
			}
		}
		if err := json.Unmarshal(e.Input, &doc); err != nil || !seen[i].Now.Equal(h.clock.Now()) ||
			doc.Now.NS != h.clock.Now().UnixNano() || doc.Now.RFC3339 != h.clock.Now().UTC().Format(time.RFC3339Nano) {
			t.Errorf("decision %d: now %+v in %s, want the engine's time %s", i, doc.Now, e.Input, h.clock.Now())
		}
	}
	if page.Decisions[0].ID == page.Decisions[1].ID {
		t.Errorf("two decisions share the id %s", page.Decisions[0].ID)
	}
	if r := engine.NewLogEntry(page.Decisions[1]).Result; r != (engine.LogResult{Decision: "REQUIRE_APPROVAL", Rule: "R7-refund-needs-approval"}) {
		t.Errorf("result %+v", r)
	}
}

// A decision logged before the log took OPA's shape shows what can be
// derived: its time, the one path decisions have, its result and revision.
func TestOldDecisionAsLogEntry(t *testing.T) {
	at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.FixedZone("CET", 3600))
	old := store.Decision{Seq: 7, At: at, Workflow: "W1", N: 2, User: "rep-ana", Tool: tool.IssueRefund,
		Args: tool.Args{Order: "O-1001", Amount: 3000}, Decision: "ALLOW", Rule: "default-allow-after-checks", Revision: "p1"}
	want := engine.LogEntry{
		Timestamp: at.UTC(), Path: engine.DecisionPath,
		Result:  engine.LogResult{Decision: "ALLOW", Rule: "default-allow-after-checks"},
		Bundles: engine.LogBundles{Countersign: engine.LogBundle{Revision: "p1"}},
		Seq:     7, At: at, Workflow: "W1", N: 2, User: "rep-ana", Tool: tool.IssueRefund, Args: old.Args,
		Decision: "ALLOW", Rule: "default-allow-after-checks", Revision: "p1",
	}
	if got := engine.NewLogEntry(old); !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
}
