package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

// token is rep-ana as a token presents her, changed by edit.
func token(edit func(*engine.Person)) engine.Person {
	p := person("rep-ana")
	edit(&p)
	return p
}

// A workflow opened with rep-ana's full delegation, then driven with a
// narrower token: the call runs under the narrower one. Without the
// control, the delegation copied at creation still pays and ships.
func TestStepRunsUnderTheNarrowerDelegation(t *testing.T) {
	for _, tc := range []struct {
		name       string
		by         engine.Person
		tool       tool.Name
		args       string
		rule       string // the deciding rule with the control on
		effects    int    // refunds and shipments with the control on
		effectsOff int
	}{
		{"a token with only the lookup scope and no ceiling cannot refund",
			token(func(p *engine.Person) { p.Scopes, p.RefundCeiling = []string{"lookup"}, 0 }),
			tool.IssueRefund, `{"order":"O-1001","amount":3000}`, "R1-scope-not-delegated", 0, 1},
		{"a token with a lower ceiling is refused downstream above it",
			token(func(p *engine.Person) { p.RefundCeiling = 1000 }),
			tool.IssueRefund, `{"order":"O-1001","amount":3000}`, "default-allow-after-checks", 0, 1},
		{"a token of another region cannot reship",
			token(func(p *engine.Person) { p.Region = "US" }),
			tool.ReshipOrder, `{"order":"O-1001"}`, "R2-order-outside-region", 0, 1},
		{"a token of another region cannot reship that region's order either",
			token(func(p *engine.Person) { p.Region = "US" }),
			tool.ReshipOrder, `{"order":"O-1003"}`, "R2-order-outside-region", 0, 0},
	} {
		for _, narrow := range []bool{true, false} {
			name := tc.name
			if !narrow {
				name += " (narrow_delegation removed)"
			}
			t.Run(name, func(t *testing.T) {
				c := engine.DefaultControls()
				c.NarrowDelegation = narrow
				h := newHarness(t, c)
				h.workflow("rep-ana", "W1")
				s, err := h.eng.Propose(context.Background(), tc.by, "W1", tc.tool, json.RawMessage(tc.args))
				if err != nil {
					t.Fatal(err)
				}
				effects := h.sys.refunds + h.sys.shipments["O-1001"] + h.sys.shipments["O-1003"]
				want := tc.effects
				if !narrow {
					want = tc.effectsOff
				}
				if effects != want {
					t.Fatalf("%d effects (step %s, %s, %s), want %d", effects, s.Status, s.Rule, s.Note, want)
				}
				if narrow && (s.Status != store.StepDenied || s.Rule != tc.rule) {
					t.Fatalf("step %s by %s (%s), want denied by %s", s.Status, s.Rule, s.Note, tc.rule)
				}
			})
		}
	}
}

// A delegation lasts as long as the token that created or last refreshed
// it. Past that, a resume without the rep's token (an operator's, the
// start-up one) holds the step; the agent's resume with a valid token runs
// it, with the lead's approval.
func TestDelegationExpiresWithItsToken(t *testing.T) {
	for _, narrow := range []bool{true, false} {
		name := "the step is held until the rep's agent resumes it"
		if !narrow {
			name = "narrow_delegation removed, the old delegation runs it"
		}
		t.Run(name, func(t *testing.T) {
			c := engine.DefaultControls()
			c.NarrowDelegation = narrow
			h := newHarness(t, c)
			ctx := context.Background()
			created := token(func(p *engine.Person) { p.Expires = h.clock.Now().Add(time.Minute) })
			if _, _, err := h.eng.CreateWorkflow(ctx, created, "W1", "T-1"); err != nil {
				t.Fatal(err)
			}
			s, err := h.eng.Propose(ctx, created, "W1", tool.IssueRefund, json.RawMessage(`{"order":"O-1002","amount":12000}`))
			if err != nil || s.Status != store.StepWaitingApproval {
				t.Fatalf("propose: %s %v", s.Status, err)
			}
			if _, err := h.eng.Approve(ctx, person("lead-dee"), s.Approval, "ok"); err != nil {
				t.Fatal(err)
			}
			h.clock.Advance(2 * time.Minute)
			snap, err := h.eng.Resume(ctx, person("ops-ida"), "W1")
			steps := snap.Steps
			if err != nil {
				t.Fatal(err)
			}
			if !narrow {
				if steps[0].Status != store.StepDone {
					t.Fatalf("step %s (%s), want done", steps[0].Status, steps[0].Note)
				}
				return
			}
			if steps[0].Status != store.StepHeld || steps[0].Note != engine.NoteDelegationExpired || h.sys.refunds != 0 {
				t.Fatalf("operator's resume: step %s %q, %d refunds; want held %q", steps[0].Status, steps[0].Note, h.sys.refunds, engine.NoteDelegationExpired)
			}
			fresh := token(func(p *engine.Person) { p.Expires = h.clock.Now().Add(time.Hour) })
			snap, err = h.eng.Resume(ctx, fresh, "W1")
			steps = snap.Steps
			if err != nil || steps[0].Status != store.StepDone || h.sys.refunds != 1 {
				t.Fatalf("agent's resume: %v, step %s (%s), %d refunds", err, steps[0].Status, steps[0].Note, h.sys.refunds)
			}
		})
	}
}

// The start-up resume has no token: a step a crash left pending past the
// delegation's expiry is held, not decided.
func TestResumeAllHoldsAStepPastItsDelegation(t *testing.T) {
	h := newHarness(t, engine.DefaultControls())
	rec := h.record()
	ctx := context.Background()
	rep := token(func(p *engine.Person) { p.Expires = h.clock.Now().Add(time.Minute) })
	if _, _, err := h.eng.CreateWorkflow(ctx, rep, "W1", "T-1"); err != nil {
		t.Fatal(err)
	}
	rec.setFail(errSlowPolicy) // the step stays pending, as after a crash
	if _, err := h.eng.Propose(ctx, rep, "W1", tool.IssueRefund, json.RawMessage(`{"order":"O-1001","amount":3000}`)); !errors.Is(err, errSlowPolicy) {
		t.Fatalf("propose: %v", err)
	}
	rec.setFail(nil)
	h.clock.Advance(time.Minute)
	if err := h.eng.ResumeAll(ctx); err != nil {
		t.Fatal(err)
	}
	_, steps, _ := h.eng.Workflow(ctx, rep, "W1")
	if steps[0].Status != store.StepHeld || steps[0].Note != engine.NoteDelegationExpired || h.sys.refunds != 0 {
		t.Fatalf("step %s %q, %d refunds", steps[0].Status, steps[0].Note, h.sys.refunds)
	}
}

// A newer token of the rep extends the delegation's life but never what it
// grants: the scope the creating token lacked stays missing.
func TestNewerTokenRefreshesButNeverWidens(t *testing.T) {
	h := newHarness(t, engine.DefaultControls())
	ctx := context.Background()
	now := h.clock.Now()
	creating := token(func(p *engine.Person) {
		p.Scopes, p.RefundCeiling, p.Expires = []string{"lookup", "reship"}, money.Cents(0), now.Add(time.Minute)
	})
	newer := token(func(p *engine.Person) { p.Expires = now.Add(time.Hour) })
	if _, _, err := h.eng.CreateWorkflow(ctx, creating, "W1", "T-1"); err != nil {
		t.Fatal(err)
	}
	s, err := h.eng.Propose(ctx, newer, "W1", tool.IssueRefund, json.RawMessage(`{"order":"O-1001","amount":3000}`))
	if err != nil || s.Rule != "R1-scope-not-delegated" || h.sys.refunds != 0 {
		t.Fatalf("refund under a newer, wider token: %s %s %v, %d refunds", s.Status, s.Rule, err, h.sys.refunds)
	}
	s, err = h.eng.Propose(ctx, newer, "W1", tool.ReshipOrder, json.RawMessage(`{"order":"O-1002"}`))
	if err != nil || s.Status != store.StepWaitingApproval {
		t.Fatalf("reship: %s %s %v", s.Status, s.Rule, err)
	}
	if _, err := h.eng.Approve(ctx, person("lead-dee"), s.Approval, ""); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(10 * time.Minute) // past the creating token, within the newer one
	snap, err := h.eng.Resume(ctx, person("ops-ida"), "W1")
	steps := snap.Steps
	if err != nil || steps[1].Status != store.StepDone {
		t.Fatalf("operator's resume within the refreshed delegation: %v, step %s %q", err, steps[1].Status, steps[1].Note)
	}
}
