package client_test

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/countersign/countersign/cmd/devstack"
	"github.com/countersign/countersign/sidecar/client"
)

// A rep's agent opens a workflow and proposes two refunds: the first runs,
// the second is denied by a named rule, answered both as the step and as a
// typed *client.Error.
func Example() {
	dir, _ := os.MkdirTemp("", "countersign-example")
	defer os.RemoveAll(dir)
	st, err := devstack.Start(context.Background(), devstack.Options{DataDir: dir})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()

	ctx := context.Background()
	c, err := client.New(st.Endpoints.Sidecar, st.Tokens["rep-ana"])
	if err != nil {
		fmt.Println(err)
		return
	}
	w, created, err := c.CreateWorkflow(ctx, client.NewWorkflow{ID: "W-100", Ticket: "T-100"})
	fmt.Println(w.ID, w.Status, created, err)

	step, err := c.ProposeStep(ctx, w.ID, "issue_refund", map[string]any{"order": "O-1001", "amount": 3000})
	fmt.Println(step.N, step.Status, step.Rule, err)

	step, err = c.ProposeStep(ctx, w.ID, "issue_refund", map[string]any{"order": "O-1002", "amount": 60000})
	var ae *client.Error
	if errors.As(err, &ae) {
		fmt.Println(step.N, step.Status, ae.Status, ae.Code, ae.Rule)
	}
	// Output:
	// W-100 running true <nil>
	// 1 done default-allow-after-checks <nil>
	// 2 denied 403 policy_denied R3-refund-over-ceiling
}
