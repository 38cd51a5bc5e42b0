package bundles_test

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/tester"

	"github.com/countersign/countersign/bundles"
)

// sourceData is rego/data.json, the data beside the one Rego source.
func sourceData(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "rego", "data.json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// rego/data.json holds the limits in force: those of the latest release,
// so that `bundle build` from rego/ changes no limit it does not declare.
// A change of rego/data.json is released as a new revision.
func TestSourceDataIsTheLatestRelease(t *testing.T) {
	latest := bundles.Names[len(bundles.Names)-1]
	dir, err := bundles.Open(latest)
	if err != nil {
		t.Fatal(err)
	}
	released, err := fs.ReadFile(dir, "data.json")
	if err != nil {
		t.Fatal(err)
	}
	var want, got any
	if err := json.Unmarshal(released, &want); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(sourceData(t), &got); err != nil {
		t.Fatalf("rego/data.json: %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("rego/data.json is not release %s's data.json:\n got %v\nwant %v", latest, got, want)
	}
}

// The Rego unit tests read the limits from the data, as `opa test rego/`
// loads it: with refund_auto raised to $75.00 in data.json they all pass
// still, and a policy that kept $50.00 written into R7 fails them, where
// tests that pinned p1's limits would pass it.
func TestRegoTestsFollowTheData(t *testing.T) {
	const r7 = "data.countersign.limits.refund_auto - input.args.amount"
	tests := []struct {
		name string
		auto int64  // refund_auto in data.json; 0 leaves it as it is
		r7   string // what R7's limit reads, if not the data
		fail []string
	}{
		{name: "rego/ as it is"},
		{name: "the auto limit raised to $75.00", auto: 7500},
		{name: "the auto limit lowered to $20.00", auto: 2000},
		{name: "the auto limit raised to $75.00 in the data, the policy still at $50.00", auto: 7500, r7: "5000 - input.args.amount",
			fail: []string{"test_r7_at_auto_limit_allowed", "test_r7_prior_refunds_up_to_auto_limit"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			copyTree(t, filepath.Join("..", "rego"), dir)
			if tt.auto != 0 {
				setAutoLimit(t, filepath.Join(dir, "data.json"), tt.auto)
			}
			if tt.r7 != "" {
				edit(t, filepath.Join(dir, "call", "call.rego"), r7, tt.r7)
			}
			results, err := tester.Run(context.Background(), dir)
			if err != nil {
				t.Fatal(err)
			}
			var failed []string
			for _, r := range results {
				if !r.Pass() {
					failed = append(failed, r.Name)
				}
			}
			if len(results) < 90 {
				t.Errorf("%d Rego tests ran, want every one of rego/", len(results))
			}
			for _, name := range tt.fail {
				if !slices.Contains(failed, name) {
					t.Errorf("%s passed, want it failed (failed: %v)", name, failed)
				}
			}
			if len(tt.fail) == 0 && len(failed) > 0 {
				t.Errorf("failed: %v", failed)
			}
		})
	}
}

func copyTree(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// setAutoLimit sets data.countersign.limits.refund_auto in a data.json.
func setAutoLimit(t *testing.T, file string, cents int64) {
	t.Helper()
	var data struct {
		Countersign struct {
			Limits map[string]int64 `json:"limits"`
		} `json:"countersign"`
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &data); err != nil {
		t.Fatal(err)
	}
	if _, ok := data.Countersign.Limits["refund_auto"]; !ok {
		t.Fatalf("%s has no countersign.limits.refund_auto", file)
	}
	data.Countersign.Limits["refund_auto"] = cents
	if b, err = json.Marshal(data); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func edit(t *testing.T, file, old, replacement string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), old) {
		t.Fatalf("%s has no %q", file, old)
	}
	if err := os.WriteFile(file, []byte(strings.Replace(string(b), old, replacement, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}
