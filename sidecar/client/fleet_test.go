package client_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/countersign/countersign/cmd/devstack"
	prodstack "github.com/countersign/countersign/cmd/stack"
	"github.com/countersign/countersign/executor/credential"
	"github.com/countersign/countersign/executor/pgtest"
	"github.com/countersign/countersign/sidecar/authn"
	"github.com/countersign/countersign/sidecar/client"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// A fleet of two sidecars on one PostgreSQL database: a change made
// through one is a new version on the other, answered at once to a wait
// that began after it and, within the shared store's poll, to a wait
// already under way.
func TestWaitWorkflowAcrossAFleet(t *testing.T) {
	dbURL := pgtest.URL(t)
	kek, err := credential.NewKeyEncryptionKey()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a, err := devstack.Start(ctx, devstack.Options{DataDir: t.TempDir(), StoreURL: dbURL, KeyEncryptionKey: kek})
	if err != nil {
		t.Fatalf("devstack.Start: %v", err)
	}
	t.Cleanup(func() { a.Close() })
	b, err := prodstack.Start(ctx, prodstack.Options{
		DataDir: filepath.Join(t.TempDir(), "b"), StoreURL: dbURL, KeyEncryptionKey: kek, Agent: devstack.AgentID,
		LedgerURL: a.Endpoints.Ledger, OrdersURL: a.Endpoints.Orders,
		Issuers:       []authn.Issuer{{Name: a.IdP.Name(), Keys: a.IdP.JWKS()}},
		PolicyTimeout: devstack.InProcessPolicyTimeout,
	})
	if err != nil {
		t.Fatalf("start the second sidecar: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	on := func(base, who string) *client.Client {
		c, err := client.New(base, a.Tokens[who], client.Strict())
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	repA, leadB, repB := on(a.Endpoints.Sidecar, "rep-ben"), on(b.URL, "lead-eli"), on(b.URL, "rep-ben")

	if _, _, err := repA.CreateWorkflow(ctx, client.NewWorkflow{ID: "W1", Ticket: "T-1"}); err != nil {
		t.Fatal(err)
	}
	step, err := repA.ProposeStep(ctx, "W1", "issue_refund", map[string]any{"order": "O-1004", "amount": 40000})
	if err != nil || step.Approval == nil {
		t.Fatalf("a $400 refund: %+v, %v", step, err)
	}
	_, v1, err := repA.WaitWorkflow(ctx, "W1", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, v, err := repB.WaitWorkflow(ctx, "W1", "", 0); err != nil || v != v1 {
		t.Errorf("the same workflow through B: version %q, %v; through A %q", v, err, v1)
	}
	if _, err := leadB.Approve(ctx, step.Approval.ID, ""); err != nil {
		t.Fatal(err)
	}
	w, v2, err := repA.WaitWorkflow(ctx, "W1", v1, client.MaxWait)
	if err != nil || v2 == v1 || w.Steps[0].Approval.Status != client.ApprovalApproved {
		t.Fatalf("through A after the approval through B: %+v, version %q (was %q), %v", w.Steps, v2, v1, err)
	}

	type waited struct {
		w       client.Workflow
		version string
		err     error
	}
	out := make(chan waited, 1)
	go func() {
		w, v, err := repA.WaitWorkflow(ctx, "W1", v2, client.MaxWait)
		out <- waited{w, v, err}
	}()
	for a.Engine.Waiting() == 0 { // the wait has begun: what follows is a change to it
		time.Sleep(time.Millisecond)
	}
	if _, err := repB.Resume(ctx, "W1"); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-out:
		if got.err != nil || got.version == v2 || got.w.Steps[0].Status == client.StepWaitingApproval {
			t.Errorf("the wait through A answered %+v, version %q (was %q), %v; want the step run", got.w.Steps, got.version, v2, got.err)
		}
	case <-time.After(20 * time.Second): // the poll is 200 ms; the wait would end at a minute
		t.Fatal("a wait through A was not woken by the resume through B")
	}
}
