package policy_test

import (
	"context"
	"testing"

	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/policy"
)

type failure struct {
	amount   money.Cents
	expected string
	got      string
}

func TestCheckEmbeddedBundles(t *testing.T) {
	tests := []struct {
		bundle string
		want   []failure
	}{
		{bundle: "p1"},
		{bundle: "p2", want: []failure{
			{5100, "REQUIRE_APPROVAL", "ALLOW"},
			{50000, "REQUIRE_APPROVAL", "ALLOW"},
			{50100, "DENY", "ALLOW"},
		}},
		{bundle: "p3"},
	}
	for _, tt := range tests {
		t.Run(tt.bundle, func(t *testing.T) {
			r, err := policy.Check(context.Background(), embedded(t, tt.bundle))
			if err != nil {
				t.Fatal(err)
			}
			if len(r.TestFailures) != 0 || r.TestsPassed == 0 {
				t.Errorf("own Rego tests: %d passed, failures %v", r.TestsPassed, r.TestFailures)
			}
			var got []failure
			for _, f := range r.Failures() {
				got = append(got, failure{f.Amount, f.Expected, f.Got})
			}
			if len(got) != len(tt.want) {
				t.Fatalf("failures = %+v, want %+v", r.Failures(), tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("failure %d = %+v, want %+v", i, got[i], tt.want[i])
				}
			}
			if r.Passed() != (len(tt.want) == 0) {
				t.Errorf("Passed() = %v", r.Passed())
			}
			if r.Revision != tt.bundle {
				t.Errorf("revision %q", r.Revision)
			}
		})
	}
}
