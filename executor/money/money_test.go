package money_test

import (
	"testing"

	"github.com/countersign/countersign/executor/money"
)

func TestCentsString(t *testing.T) {
	for _, tc := range []struct {
		in   money.Cents
		want string
	}{
		{0, "$0.00"}, {5, "$0.05"}, {3000, "$30.00"}, {12050, "$120.50"},
		{100000, "$1,000.00"}, {123456789, "$1,234,567.89"}, {-76900, "-$769.00"},
	} {
		if got := tc.in.String(); got != tc.want {
			t.Errorf("Cents(%d).String() = %q, want %q", tc.in, got, tc.want)
		}
	}
}
