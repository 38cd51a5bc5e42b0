package systems_test

import (
	"context"
	"net"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/bundles"
	"github.com/countersign/countersign/executor/credential"
	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/fixture"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/sim/ledger"
	"github.com/countersign/countersign/executor/sim/orders"
	"github.com/countersign/countersign/executor/sim/simserver"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/systems"
	"github.com/countersign/countersign/executor/tool"
)

// stack is the engine over the real dispatcher, the real ledger and order
// system on loopback, and a credential Authority whose JWKS they fetch.
type stack struct {
	t      *testing.T
	eng    *engine.Engine
	orders *orders.Server
}

// attemptTimeout is short so that a delayed reship is a lost answer at once.
const attemptTimeout = 300 * time.Millisecond

func newStack(t *testing.T, controls engine.Controls) *stack {
	t.Helper()
	dir := t.TempDir()
	auth, err := credential.Open(credential.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	jwks := httptest.NewServer(auth.JWKSHandler())
	t.Cleanup(jwks.Close)
	sim := simserver.Options{DataDir: dir, JWKSURL: jwks.URL, JWKSMaxAge: time.Second, NoSync: true}
	led, err := ledger.Open(ledger.Options{Options: sim})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = led.Close() })
	var seed []orders.Order
	for _, o := range fixture.Orders() {
		seed = append(seed, orders.Order{ID: o.ID, Region: o.Region, Customer: o.Customer, Paid: int64(o.Paid), Status: o.Status})
	}
	ord, err := orders.Open(orders.Options{Options: sim, Orders: seed})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ord.Close() })
	sys, err := systems.New(systems.Options{
		LedgerURL: serve(t, led), OrdersURL: serve(t, ord), Minter: auth, Agent: "agent-1",
		AttemptTimeout: attemptTimeout,
	})
	if err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(filepath.Join(dir, "state.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	pol := policy.New(policy.Options{Timeout: 5 * time.Second}) // not the 100 ms default: a loaded CI machine is slow
	p1, err := bundles.Open("p1")
	if err != nil {
		t.Fatal(err)
	}
	b, err := policy.LoadFS(p1)
	if err != nil {
		t.Fatal(err)
	}
	pol.Restore(b)
	eng := engine.New(engine.Options{Store: db, Policy: pol, Systems: sys, Controls: &controls})
	return &stack{t: t, eng: eng, orders: ord}
}

func serve(t *testing.T, h interface{ Serve(net.Listener) error }) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = h.Serve(l) }()
	return "http://" + l.Addr().String()
}

func person(id string) engine.Person {
	p, _ := fixture.PersonByID(id)
	return engine.Person{ID: p.ID, Role: p.Role, Region: p.Region, Scopes: p.Scopes, RefundCeiling: p.RefundCeiling, ApproveLimit: p.ApproveLimit}
}

// reship opens workflow wf and proposes a reship of O-1001 in it; should
// the policy ask a lead for it, lead-dee approves and the rep resumes.
func (s *stack) reship(wf string) store.Step {
	s.t.Helper()
	ctx := context.Background()
	if _, _, err := s.eng.CreateWorkflow(ctx, person("rep-ana"), wf, "T-"+wf); err != nil {
		s.t.Fatal(err)
	}
	st, err := s.eng.Propose(ctx, person("rep-ana"), wf, tool.ReshipOrder, []byte(`{"order":"O-1001"}`))
	if err != nil {
		s.t.Fatalf("reship in %s: %v", wf, err)
	}
	if st.Status == store.StepWaitingApproval {
		if _, err := s.eng.Approve(ctx, person("lead-dee"), st.Approval, ""); err != nil {
			s.t.Fatal(err)
		}
		st = s.resume(wf)
	}
	return st
}

func (s *stack) resume(wf string) store.Step {
	s.t.Helper()
	snap, err := s.eng.Resume(context.Background(), person("rep-ana"), wf)
	steps := snap.Steps
	if err != nil {
		s.t.Fatalf("resume %s: %v", wf, err)
	}
	return steps[0]
}

func (s *stack) shipments() []orders.Shipment {
	s.t.Helper()
	all, err := s.orders.Shipments("O-1001")
	if err != nil {
		s.t.Fatal(err)
	}
	return all
}

// TestUnknownReshipNotResolvedByAnotherWorkflowsShipment is issue 9's
// reproduction over real sockets: the order system holds W1's reship past
// the client's timeout (W1/1 unknown, no shipment); with the delay
// cleared, W2 reships O-1001 (S1); resuming W1 must not take S1 for its
// own: it stays unknown while its request may still land. With the lookup
// by reference removed, the count against the baseline does exactly that.
func TestUnknownReshipNotResolvedByAnotherWorkflowsShipment(t *testing.T) {
	for _, tc := range []struct {
		name              string
		noReferenceLookup bool
		w1                store.StepStatus
	}{
		{"by reference: W1/1 stays unknown", false, store.StepUnknown},
		{"by count (control removed): W1/1 takes W2's shipment", true, store.StepDone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := engine.DefaultControls()
			c.ResolveByReference = !tc.noReferenceLookup
			s := newStack(t, c)
			if err := s.orders.SetFaults(orders.Faults{DelayWritesMS: 60_000}); err != nil {
				t.Fatal(err)
			}
			if w1 := s.reship("W1"); w1.Status != store.StepUnknown {
				t.Fatalf("W1/1 %s (%s), want unknown", w1.Status, w1.Note)
			}
			if err := s.orders.SetFaults(orders.Faults{}); err != nil {
				t.Fatal(err)
			}
			if n := len(s.shipments()); n != 0 {
				t.Fatalf("%d shipments after W1's held request, want 0", n)
			}
			if w2 := s.reship("W2"); w2.Status != store.StepDone {
				t.Fatalf("W2/1 %s (%s), want done", w2.Status, w2.Note)
			}
			w1 := s.resume("W1")
			if w1.Status != tc.w1 {
				t.Fatalf("W1/1 %s (%s), want %s", w1.Status, w1.Note, tc.w1)
			}
			if tc.w1 == store.StepUnknown && !strings.Contains(w1.Note, "may still land until") {
				t.Errorf("W1/1 note %q does not say until when its request may still land", w1.Note)
			}
			all := s.shipments()
			if len(all) != 1 || !strings.HasPrefix(all[0].Reference, "cs-") {
				t.Fatalf("shipments %+v, want W2's one, with its reference", all)
			}
		})
	}
}

// TestLostReshipAnswerResolvedByReference: the order system ships and the
// answer is lost; resume finds the shipment by the step's reference and
// records it as the step's result, without shipping again.
func TestLostReshipAnswerResolvedByReference(t *testing.T) {
	s := newStack(t, engine.DefaultControls())
	if err := s.orders.SetFaults(orders.Faults{LoseResponse: 1}); err != nil {
		t.Fatal(err)
	}
	if st := s.reship("W1"); st.Status != store.StepUnknown {
		t.Fatalf("W1/1 %s (%s), want unknown", st.Status, st.Note)
	}
	for range 2 {
		st := s.resume("W1")
		if st.Status != store.StepDone || !strings.Contains(st.Note, "resolved by reference") || !strings.Contains(string(st.Result), `"id":"S1"`) {
			t.Fatalf("W1/1 %s (%s) result %s, want done by reference with S1", st.Status, st.Note, st.Result)
		}
	}
	if n := len(s.shipments()); n != 1 {
		t.Fatalf("%d shipments, want 1", n)
	}
}
