package identity_test

import (
	"errors"
	"testing"

	"github.com/countersign/countersign/executor/identity"
)

func TestSame(t *testing.T) {
	cases := []struct {
		a, b string
		want bool
	}{
		{"ops-ida", "ops-ida", true},
		{"OPS-IDA", "ops-ida", true},
		{"ＯＰＳ－ＩＤＡ", "ops-ida", true},
		{"e\u0301", "é", true},
		{"ops-іda", "ops-ida", false}, // Cyrillic і: another person
		{"ops-ida", "ops-ben", false},
		{"ops ida", "ops ida", true}, // invalid on both sides: byte equality
		{"ops ida", "ops-ida", false},
	}
	for _, c := range cases {
		if got := identity.Same(c.a, c.b); got != c.want {
			t.Errorf("Same(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

func TestCanonicalRefuses(t *testing.T) {
	for _, sub := range []string{"", "ops ida", " ops-ida", "ops-ida\u200d", "ops-ida\u00a0"} {
		if _, err := identity.Canonical(sub); !errors.Is(err, identity.ErrInvalid) {
			t.Errorf("Canonical(%q) = %v, want ErrInvalid", sub, err)
		}
	}
	if c, err := identity.Canonical("Lead-Dee"); err != nil || c != "lead-dee" {
		t.Errorf("Canonical(Lead-Dee) = %q, %v", c, err)
	}
}
