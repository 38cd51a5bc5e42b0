package sidecar

import "testing"

// A decision log cursor is read back only as the cursor written for it:
// any other string is refused, never taken for some other position.
func FuzzParseCursor(f *testing.F) {
	for _, seed := range []string{newCursor(1), newCursor(1 << 40), "", "AAAAAAAAAAA", "!!!", "AAAA", newCursor(7) + "=",
		"00000000001", "0000000\n0000"} { // base64 decodes both to the number of "00000000000"
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		seq, err := parseCursor(s)
		if err != nil {
			return
		}
		if seq == 0 || newCursor(seq) != s {
			t.Errorf("parseCursor(%q) = %d, which is written %q", s, seq, newCursor(seq))
		}
	})
}
