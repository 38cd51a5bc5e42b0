// Package money holds the one money type of countersign: integer cents.
//
// Money never passes through a float anywhere in the system: JSON carries
// integer cents, Rego compares integer cents, the ledger stores integer cents.
package money

import "fmt"

// Cents is an amount of money in the smallest unit (US cents).
type Cents int64

// String formats c as dollars for people: 12050 is "$120.50".
func (c Cents) String() string {
	sign := ""
	v := int64(c)
	if v < 0 {
		sign, v = "-", -v
	}
	return fmt.Sprintf("%s$%s.%02d", sign, groupThousands(v/100), v%100)
}

// groupThousands writes n with commas between groups of three digits.
func groupThousands(n int64) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
