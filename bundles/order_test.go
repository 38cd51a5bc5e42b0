package bundles

import "testing"

// Releases are ordered by the number their revision ends with, so p10
// comes after p9, not after p1.
func TestSequence(t *testing.T) {
	for rev, want := range map[string]int{"p1": 1, "p10": 10, "p007": 7, "2025.06.01": 1, "p": -1, "": -1, "p0": 0} {
		if got := sequence(rev); got != want {
			t.Errorf("sequence(%q) = %d, want %d", rev, got, want)
		}
	}
	if len(Names) == 0 {
		t.Fatal("no release embedded")
	}
	for _, name := range Names {
		if sequence(name) < 0 {
			t.Errorf("release %s: a revision ends with its number, which orders the releases", name)
		}
	}
}
