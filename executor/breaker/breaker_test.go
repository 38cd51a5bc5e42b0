package breaker_test

import (
	"testing"
	"time"

	"github.com/countersign/countersign/executor/breaker"
)

func TestRecord(t *testing.T) {
	lim := breaker.Limits{Window: time.Minute, MaxFailures: 3}
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		offsets   []time.Duration // of each failure from t0
		wantTrips []bool          // whether each failure trips
	}{
		{"three failures inside the window trip at the third",
			[]time.Duration{0, 10 * time.Second, 20 * time.Second}, []bool{false, false, true}},
		{"failures that slide out of the window do not count",
			[]time.Duration{0, 30 * time.Second, 61 * time.Second, 92 * time.Second}, []bool{false, false, false, false}},
		{"a failure exactly one window old has left it",
			[]time.Duration{0, time.Minute, time.Minute + time.Second}, []bool{false, false, false}},
		{"a tripped breaker trips once and stays tripped",
			[]time.Duration{0, 1, 2, 3, time.Hour}, []bool{false, false, true, false, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s breaker.State
			for i, off := range tt.offsets {
				var tripped bool
				s, tripped = s.Record(t0.Add(off), lim, "policy_denied R3")
				if tripped != tt.wantTrips[i] {
					t.Fatalf("failure %d: tripped %v, want %v", i+1, tripped, tt.wantTrips[i])
				}
			}
			wantTripped := false
			for _, w := range tt.wantTrips {
				wantTripped = wantTripped || w
			}
			if s.Tripped() != wantTripped {
				t.Fatalf("state tripped %v, want %v", s.Tripped(), wantTripped)
			}
			if s.Tripped() && (s.Trip.Failures != 3 || s.Trip.WindowSeconds != 60 || s.Trip.Last != "policy_denied R3") {
				t.Errorf("trip %+v, want 3 failures in 60 s, last policy_denied R3", s.Trip)
			}
		})
	}
}
