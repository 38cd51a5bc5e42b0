package engine_test

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

// askLead is the next of every call that waits for a lead.
const askLead = "ask a lead: the step waits for a lead's approval; resume the workflow (or wait on it) to see the answer, and do not propose the call again"

// Every rule a decision can end on is explained by the fact that decided,
// with numbers from the input and the bundle's limits, and what can be
// done next. Where p1 decides the rule itself, it is asked first, so each
// case is an input that really ends on its rule.
func TestExplainEveryRule(t *testing.T) {
	h := newHarness(t, engine.DefaultControls())
	lim, err := h.pol.Limits()
	if err != nil {
		t.Fatal(err)
	}
	all := []string{"lookup", "refund", "reship"}
	ana := &policy.User{ID: "rep-ana", Role: "rep", Region: "EU", Scopes: all, RefundCeiling: 50000}
	ben := &policy.User{ID: "rep-ben", Role: "rep", Region: "US", Scopes: all, RefundCeiling: 50000}
	o1001 := &policy.Order{ID: "O-1001", Region: "EU", Customer: "customer-1", Paid: 12000, Status: "shipped",
		Lines: []policy.Line{{ID: "L1", SKU: "S1", UnitAmount: 3000, Quantity: 4, RefundedQuantity: 2}}}
	o1002 := &policy.Order{ID: "O-1002", Region: "EU", Customer: "customer-2", Paid: 48000, Status: "shipped"}
	o1003 := &policy.Order{ID: "O-1003", Region: "US", Customer: "customer-3", Paid: 8000, Status: "shipped"}
	o1004 := &policy.Order{ID: "O-1004", Region: "US", Customer: "customer-4", Paid: 42000, Status: "shipped"}
	o1005 := &policy.Order{ID: "O-1005", Region: "EU", Customer: "customer-5", Paid: 6000, Status: "paid"}
	refund := func(u *policy.User, o *policy.Order, id string, amount money.Cents, t policy.Totals) policy.Input {
		return policy.Input{User: u, Tool: tool.IssueRefund, Args: tool.Args{Order: id, Amount: amount}, Order: o, Totals: t}
	}
	reship := func(o *policy.Order, reships int) policy.Input {
		return policy.Input{User: ana, Tool: tool.ReshipOrder, Args: tool.Args{Order: o.ID}, Order: o, Totals: policy.Totals{OrderReships: reships}}
	}
	line := func(l string, q int64, amount money.Cents) policy.Input {
		in := refund(ana, o1001, "O-1001", amount, policy.Totals{})
		in.Args.Line, in.Args.Quantity = l, q
		return in
	}
	bounded := func(in policy.Input, r policy.Run) policy.Input { in.Workflow = &r; return in }
	none := policy.Totals{}

	for _, tc := range []struct {
		name string
		in   policy.Input
		// rule is what decides; engineRule: the engine applies it after
		// the policy (the bounds, R12, the tool's mode), so p1 is not asked.
		rule       string
		decision   policy.Decision
		engineRule bool
		text, next string
		facts      string // the facts as JSON; null for none
	}{
		{"no rep at all", refund(nil, o1001, "O-1001", 3000, none), "R0-unknown-user", policy.Deny, false,
			"the call names no rep the policy knows", "nothing: a call is made with the token of the rep the agent works for", `null`},
		{"a lead's token for a rep's call", refund(&policy.User{ID: "lead-dee", Role: "lead", Region: "EU", Scopes: []string{}}, o1001, "O-1001", 3000, none),
			"R0-unknown-user", policy.Deny, false,
			`lead-dee is not a rep the policy knows (role "lead", region "EU"): a call needs a rep with a region and delegated scopes`,
			"nothing: a call is made with the token of the rep the agent works for", `{"region":"EU","role":"lead","user":"lead-dee"}`},
		{"a tool the policy does not know", policy.Input{User: ana, Tool: "delete_order", Args: tool.Args{Order: "O-1001"}, Order: o1001},
			"default-deny", policy.Deny, false,
			"no rule of the policy allows delete_order", "nothing: use a tool GET /v1/tools lists, with the arguments its schema names", `{"tool":"delete_order"}`},
		{"a rep without the refund scope", refund(&policy.User{ID: "rep-cy", Role: "rep", Region: "EU", Scopes: []string{"lookup"}}, o1001, "O-1001", 3000, none),
			"R1-scope-not-delegated", policy.Deny, false,
			"rep-cy has not delegated the refund scope that issue_refund needs (delegated: lookup)",
			"nothing: the rep's delegation does not cover it; a rep whose delegation has the refund scope makes this call",
			`{"rep":"rep-cy","scope":"refund","scopes":["lookup"]}`},
		{"an order of another region", refund(ana, o1003, "O-1003", 2000, none), "R2-order-outside-region", policy.Deny, false,
			"order O-1003 is in region US; the rep's region is EU", "nothing: only a rep of region US acts on this order; hand the ticket to one",
			`{"order":"O-1003","order_region":"US","rep_region":"EU"}`},
		{"an order nobody has", refund(ana, nil, "O-9", 2000, none), "R2-order-outside-region", policy.Deny, false,
			"order O-9 was not found, or is not one the rep may see", "nothing: check the order id with the customer; lookup_order reads an order", `{"order":"O-9"}`},
		{"a token of another region than the workflow's", refund(&policy.User{ID: "rep-ana", Role: "rep", Region: engine.RegionMismatch, Scopes: all}, o1001, "O-1001", 2000, none),
			"R2-order-outside-region", policy.Deny, false,
			"the token presented names another region than the rep's delegation to this workflow",
			"nothing: drive the workflow with a token of its rep, in the rep's region", `{"order":"O-1001"}`},
		{"a refund over the ceiling", refund(ana, o1002, "O-1002", 60000, none), "R3-refund-over-ceiling", policy.Deny, false,
			"$600.00 requested; one refund is at most $500.00", "a smaller amount, at most $480.00", `{"refund_max":50000,"requested":60000}`},
		{"more than is left of the amount paid", refund(ben, o1004, "O-1004", 7000, policy.Totals{OrderRefunded: 36000}), "R4-exceeds-amount-paid", policy.Deny, false,
			"$70.00 requested, $60.00 left of $420.00 paid", "a smaller amount, at most $60.00",
			`{"left":6000,"order":"O-1004","paid":42000,"refunded":36000,"requested":7000}`},
		{"an order refunded in full", refund(ben, o1003, "O-1003", 100, policy.Totals{OrderRefunded: 8000}), "R4-exceeds-amount-paid", policy.Deny, false,
			"$1.00 requested, $0.00 left of $80.00 paid", "nothing: the order's amount paid is refunded in full",
			`{"left":0,"order":"O-1003","paid":8000,"refunded":8000,"requested":100}`},
		{"over the rep's day", refund(ana, o1001, "O-1001", 7000, policy.Totals{RepDay: 98000}), "R5-rep-daily-cap", policy.Deny, false,
			"rep's day: $980.00 of $1,000.00 used; $70.00 requested", "a smaller amount, at most $20.00",
			`{"left":2000,"rep_daily":100000,"rep_day":98000,"requested":7000,"window_seconds":86400}`},
		{"the rep's day used up", refund(ana, o1001, "O-1001", 100, policy.Totals{RepDay: 100000}), "R5-rep-daily-cap", policy.Deny, false,
			"rep's day: $1,000.00 of $1,000.00 used; $1.00 requested",
			"nothing: the rep's day is used up; room comes back as refunds leave the rolling 24 hours",
			`{"left":0,"rep_daily":100000,"rep_day":100000,"requested":100,"window_seconds":86400}`},
		{"over the agent's hour", refund(ana, o1001, "O-1001", 3000, policy.Totals{AgentHour: 299000}), "R6-agent-hourly-cap", policy.Deny, false,
			"agent's hour: $2,990.00 of $3,000.00 used; $30.00 requested", "a smaller amount, at most $10.00",
			`{"agent_hour":299000,"agent_hourly":300000,"left":1000,"requested":3000}`},
		{"a refund that needs a lead", refund(ana, o1002, "O-1002", 12000, none), "R7-refund-needs-approval", policy.RequireApproval, false,
			"$120.00 requested on order O-1002, $0.00 refunded before: above $50.00 in all on one order a lead approves",
			askLead + "; or amend it to at most $50.00, which runs without one",
			`{"order":"O-1002","refund_auto":5000,"refunded":0,"requested":12000}`},
		{"a refund that needs a lead after refunds that used the automatic room", refund(ana, o1002, "O-1002", 1000, policy.Totals{OrderRefunded: 5000}),
			"R7-refund-needs-approval", policy.RequireApproval, false,
			"$10.00 requested on order O-1002, $50.00 refunded before: above $50.00 in all on one order a lead approves", askLead,
			`{"order":"O-1002","refund_auto":5000,"refunded":5000,"requested":1000}`},
		{"a reship of an order not shipped", reship(o1005, 0), "R8-order-not-shipped", policy.Deny, false,
			"order O-1005 is paid, not shipped", "nothing: only a shipped order is reshipped; if it was never sent, a person checks it in the order system",
			`{"order":"O-1005","status":"paid"}`},
		{"a reship of an order paid over the approval value", reship(o1002, 0), "R9-reship-needs-approval", policy.RequireApproval, false,
			"order O-1002 was paid $480.00; reshipping an order paid over $300.00 needs a lead's approval", askLead,
			`{"order":"O-1002","paid":48000,"reship_approval_value":30000}`},
		{"a second reship", reship(o1001, 1), "R10-order-already-reshipped", policy.RequireApproval, false,
			"order O-1001 was reshipped once before; a second reship needs a lead's approval", askLead, `{"order":"O-1001","reships":1}`},
		{"a third reship", reship(o1001, 2), "R11-reship-limit", policy.Deny, false,
			"order O-1001 was reshipped 2 times before; it is not reshipped again",
			"nothing: an order is reshipped at most twice; a person decides what else the customer gets", `{"order":"O-1001","reships":2}`},
		{"a workflow past its deadline", bounded(refund(ana, o1001, "O-1001", 3000, none), policy.Run{PastDeadline: true}),
			engine.RuleDeadline, policy.Deny, true,
			"the workflow's deadline has passed: it pays nothing more", "nothing: this workflow may do no more of it; hand the ticket back to a person", `null`},
		{"a step over the workflow's steps", bounded(refund(ana, o1001, "O-1001", 3000, none), policy.Run{Step: 6, MaxSteps: 5}),
			engine.RuleStepLimit, policy.Deny, true,
			"this is step 6 of a workflow bounded to 5 steps", "nothing: this workflow may do no more of it; hand the ticket back to a person",
			`{"max_steps":5,"step":6}`},
		{"a refund over the workflow's spending bound", bounded(refund(ana, o1001, "O-1001", 7000, none), policy.Run{Spent: 45000, MaxSpend: 50000}),
			engine.RuleSpendLimit, policy.Deny, true,
			"$70.00 requested; the workflow has refunded $450.00 of its $500.00 bound", "a smaller amount, at most $50.00",
			`{"left":5000,"max_spend":50000,"requested":7000,"spent":45000}`},
		{"a step attempted too often", bounded(refund(ana, o1001, "O-1001", 3000, none), policy.Run{Attempt: 4, MaxAttempts: 3}),
			engine.RuleAttemptLimit, policy.Deny, true,
			"this is attempt 4 of the step; a step is attempted at most 3 times", "nothing: this workflow may do no more of it; hand the ticket back to a person",
			`{"attempt":4,"max_attempts":3}`},
		{"a line-item refund that needs a lead", line("L1", 2, 6000), "R7-refund-needs-approval", policy.RequireApproval, false,
			"$60.00 requested on order O-1001, $0.00 refunded before: above $50.00 in all on one order a lead approves",
			askLead + "; or amend it to at most 1 of line L1 ($30.00), which runs without one",
			`{"order":"O-1001","refund_auto":5000,"refunded":0,"requested":6000}`},
		{"a line-item refund over the rep's day", func() policy.Input { in := line("L1", 2, 6000); in.Totals.RepDay = 96000; return in }(),
			"R5-rep-daily-cap", policy.Deny, false,
			"rep's day: $960.00 of $1,000.00 used; $60.00 requested", "a smaller quantity, at most 1 of line L1 ($30.00)",
			`{"left":4000,"rep_daily":100000,"rep_day":96000,"requested":6000,"window_seconds":86400}`},
		{"a line the order does not have", line("L9", 1, 0), engine.RuleLineNotRefundable, policy.Deny, true,
			"order O-1001 has no line L9", "nothing: name a line of the order; lookup_order lists them", `{"line":"L9","order":"O-1001"}`},
		{"more units than are left on the line", line("L1", 3, 9000), engine.RuleLineNotRefundable, policy.Deny, true,
			"3 of line L1 of order O-1001 requested; 2 left to refund (4 bought, 2 refunded)", "a smaller quantity, at most 2",
			`{"bought":4,"left":2,"line":"L1","max_quantity":2,"order":"O-1001","quantity":3,"refunded_quantity":2}`},
		{"a tool in approval_only mode", policy.Input{User: ana, Tool: tool.IssueRefund, Args: tool.Args{Order: "O-1001", Amount: 3000}},
			engine.RuleApprovalOnly, policy.RequireApproval, true,
			"issue_refund runs in approval_only mode (set by an operator, or by the circuit breaker of this agent version): every call of it that the policy allows waits for a lead",
			askLead, `{"mode":"approval_only","tool":"issue_refund"}`},
		{"a bundle's own denial", refund(ana, o1001, "O-1001", 3000, none), "R13-customer-on-hold", policy.Deny, true,
			"the policy denies this call (rule R13-customer-on-hold)",
			"nothing: the policy refuses this call as it stands; tell the person it was refused and under which rule", `null`},
		{"a bundle's own approval", refund(ana, o1001, "O-1001", 3000, none), "R13-customer-on-hold", policy.RequireApproval, true,
			"the policy asks a lead to approve this call (rule R13-customer-on-hold)", askLead, `null`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.engineRule {
				res, err := h.pol.Decide(context.Background(), tc.in)
				if err != nil || res.Rule != tc.rule || res.Decision != tc.decision {
					t.Fatalf("p1 decides %+v (%v), want %s %s: the case does not meet its rule", res, err, tc.decision, tc.rule)
				}
			}
			got := engine.Explain(policy.Result{Decision: tc.decision, Rule: tc.rule}, tc.in, lim)
			if got.Text != tc.text {
				t.Errorf("text\n got %q\nwant %q", got.Text, tc.text)
			}
			if got.Next != tc.next {
				t.Errorf("next\n got %q\nwant %q", got.Next, tc.next)
			}
			if f, _ := json.Marshal(got.Facts); string(f) != tc.facts {
				t.Errorf("facts\n got %s\nwant %s", f, tc.facts)
			}
		})
	}
}

// Every rule rego/call names has an explanation of its own: a rule added
// to the policy without one fails here, rather than reaching agents as
// the generic text of a rule nobody explained.
func TestExplainKnowsEveryRuleOfThePolicy(t *testing.T) {
	src, err := os.ReadFile("../../rego/call/call.rego")
	if err != nil {
		t.Fatal(err)
	}
	rules := map[string]policy.Decision{}
	for _, m := range regexp.MustCompile(`(deny|require_approval)\("([^"]+)"\)`).FindAllStringSubmatch(string(src), -1) {
		rules[m[2]] = map[string]policy.Decision{"deny": policy.Deny, "require_approval": policy.RequireApproval}[m[1]]
	}
	rules["default-deny"] = policy.Deny
	delete(rules, "rule") // the helpers' own parameter
	engineRules := map[string]policy.Decision{engine.RuleDeadline: policy.Deny, engine.RuleStepLimit: policy.Deny, engine.RuleSpendLimit: policy.Deny,
		engine.RuleAttemptLimit: policy.Deny, engine.RuleLineNotRefundable: policy.Deny, engine.RuleApprovalOnly: policy.RequireApproval}
	if len(rules) < 15 {
		t.Fatalf("found only %d rules in call.rego: %v", len(rules), slices.Sorted(maps.Keys(rules)))
	}
	for rule, d := range engineRules {
		rules[rule] = d
	}
	lim := policy.Limits{RefundAuto: 5000, RefundMax: 50000, ReshipApprovalValue: 30000, RepDaily: 100000, AgentHourly: 300000}
	in := policy.Input{Tool: tool.IssueRefund, Args: tool.Args{Order: "O-1001", Amount: 3000}}
	for rule, d := range rules {
		got := engine.Explain(policy.Result{Decision: d, Rule: rule}, in, lim)
		if strings.Contains(got.Text, "(rule "+rule+")") || got.Text == "" || got.Next == "" {
			t.Errorf("%s: no explanation of its own: %+v", rule, got)
		}
	}
}

// A step keeps its reason in the store: after a restart the engine reads
// the same reason, and a step that moves on (approved, then run) keeps
// none.
func TestReasonIsStoredWithTheStep(t *testing.T) {
	h := newHarness(t, engine.DefaultControls())
	ctx := context.Background()
	h.workflow("rep-ana", "W1")
	denied := h.propose("rep-ana", "W1", tool.IssueRefund, `{"order":"O-1003","amount":2000}`)
	waiting := h.propose("rep-ana", "W1", tool.IssueRefund, `{"order":"O-1002","amount":12000}`)
	if denied.Reason == nil || denied.Reason.Text != "order O-1003 is in region US; the rep's region is EU" {
		t.Fatalf("denied step's reason %+v", denied.Reason)
	}
	if waiting.Reason == nil || waiting.Reason.Next == "" || !strings.HasPrefix(waiting.Reason.Next, "ask a lead") {
		t.Fatalf("waiting step's reason %+v", waiting.Reason)
	}
	h.open() // a restart
	snap, err := h.eng.Snapshot(ctx, person("rep-ana"), "W1")
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []*store.Reason{denied.Reason, waiting.Reason} {
		got, _ := json.Marshal(snap.Steps[i].Reason)
		w, _ := json.Marshal(want)
		if string(got) != string(w) {
			t.Errorf("step %d after a restart: reason %s, want %s", i+1, got, w)
		}
	}
	if _, err := h.eng.Approve(ctx, person("lead-dee"), waiting.Approval, ""); err != nil {
		t.Fatal(err)
	}
	snap, err = h.eng.Resume(ctx, person("rep-ana"), "W1")
	if err != nil {
		t.Fatal(err)
	}
	if s := snap.Steps[1]; s.Status != store.StepDone || s.Reason != nil {
		t.Errorf("the approved step is %s with reason %+v, want done without one", s.Status, s.Reason)
	}
}

// A held step says why and what to do: its tool switched off, or its
// delegation expired.
func TestHeldStepsAreExplained(t *testing.T) {
	h := newHarness(t, engine.DefaultControls())
	ctx := context.Background()
	h.workflow("rep-ana", "W1")
	if err := h.eng.SetSwitch(ctx, person("ops-ida"), tool.IssueRefund, false, "incident"); err != nil {
		t.Fatal(err)
	}
	s := h.propose("rep-ana", "W1", tool.IssueRefund, `{"order":"O-1001","amount":2000}`)
	if s.Status != store.StepHeld || s.Reason == nil || s.Reason.Text != "issue_refund is switched off by an operator" ||
		!strings.HasPrefix(s.Reason.Next, "wait: resume the workflow once an operator switches issue_refund on") {
		t.Errorf("held step %s, reason %+v", s.Status, s.Reason)
	}
}

// A step held past its delegation says so, and that a current token of
// the rep resumes it.
func TestExpiredDelegationIsExplained(t *testing.T) {
	h := newHarness(t, engine.DefaultControls())
	ctx := context.Background()
	rep := token(func(p *engine.Person) { p.Expires = h.clock.Now().Add(time.Minute) })
	if _, _, err := h.eng.CreateWorkflow(ctx, rep, "W1", "T-1"); err != nil {
		t.Fatal(err)
	}
	s := h.propose("rep-ana", "W1", tool.IssueRefund, `{"order":"O-1002","amount":12000}`)
	if _, err := h.eng.Approve(ctx, person("lead-dee"), s.Approval, "ok"); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(2 * time.Minute)
	snap, err := h.eng.Resume(ctx, person("ops-ida"), "W1")
	if err != nil {
		t.Fatal(err)
	}
	got := snap.Steps[0]
	if got.Status != store.StepHeld || got.Reason == nil || got.Reason.Text != "the rep's delegation to the agent for this workflow has expired" ||
		!strings.HasPrefix(got.Reason.Next, "resume the workflow with a current token of its rep") {
		t.Errorf("step %s (was %s), reason %+v", got.Status, s.Status, got.Reason)
	}
}

// A call a system of record refuses is denied with the system's code and
// message as its reason.
func TestRefusalDownstreamIsExplained(t *testing.T) {
	h := newHarness(t, engine.DefaultControls())
	ctx := context.Background()
	h.workflow("rep-ana", "W1")
	narrow := person("rep-ana")
	narrow.RefundCeiling = 1000 // a later token delegates less: the ledger refuses above it
	s, err := h.eng.Propose(ctx, narrow, "W1", tool.IssueRefund, json.RawMessage(`{"order":"O-1001","amount":3000}`))
	if err != nil {
		t.Fatal(err)
	}
	if s.Status != store.StepDenied || s.Reason == nil || s.Reason.Text != "the ledger refused the call: amount_above_max: over the rep's ceiling" ||
		!strings.HasPrefix(s.Reason.Next, "nothing: ") || s.Reason.Facts["code"] != "amount_above_max" {
		t.Errorf("step %s, reason %+v", s.Status, s.Reason)
	}
}
