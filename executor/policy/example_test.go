package policy_test

import (
	"context"
	"fmt"

	"github.com/countersign/countersign/bundles"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/tool"
)

// An engine activates a bundle through the gate, then decides calls.
func ExampleEngine_Decide() {
	ctx := context.Background()
	dir, _ := bundles.Open("p1")
	p1, err := policy.LoadFS(dir)
	if err != nil {
		panic(err)
	}
	e := policy.New(policy.Options{})
	if _, err := e.Activate(ctx, p1, policy.Activation{By: "ops-ida"}); err != nil {
		panic(err)
	}
	r, err := e.Decide(ctx, policy.Input{
		User:  &policy.User{ID: "rep-ana", Role: "rep", Region: "EU", Scopes: []string{"refund"}},
		Tool:  tool.IssueRefund,
		Args:  tool.Args{Order: "O-1002", Amount: 12000},
		Order: &policy.Order{ID: "O-1002", Region: "EU", Customer: "customer-2", Paid: 48000, Status: "shipped"},
	})
	if err != nil {
		panic(err) // a caller treats any error as a denial
	}
	fmt.Println(r.Decision, r.Rule, r.Revision)
	// Output: REQUIRE_APPROVAL R7-refund-needs-approval p1
}

// The gate rejects p2, whose limits are 100 times too large and not
// declared as changes, and says why: the undeclared changes, then the
// boundary cases, run at the reference limits, that p2 answers wrongly.
func ExampleCheck() {
	dir, _ := bundles.Open("p2")
	p2, err := policy.LoadFS(dir)
	if err != nil {
		panic(err)
	}
	reference, err := policy.BaselineLimits() // no bundle is active: p1's
	if err != nil {
		panic(err)
	}
	report, err := policy.Check(context.Background(), p2, reference)
	if err != nil {
		panic(err)
	}
	for _, f := range report.LimitFailures {
		fmt.Println(f.Case, "expected", f.Expected, "got", f.Got)
	}
	for _, c := range report.Cases {
		if !c.Pass() {
			fmt.Println(c.Amount, "expected", c.Expected, "got", c.Got)
		}
	}
	fmt.Println("passed:", report.Passed())
	// Output:
	// limit_change_undeclared expected refund_auto 5000 got refund_auto 500000 (undeclared)
	// limit_change_undeclared expected refund_max 50000 got refund_max 5000000 (undeclared)
	// $51.00 expected REQUIRE_APPROVAL got ALLOW
	// $500.00 expected REQUIRE_APPROVAL got ALLOW
	// $501.00 expected DENY got ALLOW
	// passed: false
}
