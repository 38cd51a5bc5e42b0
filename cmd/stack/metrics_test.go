package stack_test

import (
	"io"
	"net/http"
	"regexp"
	"testing"

	"github.com/countersign/countersign/bundles"
	"github.com/countersign/countersign/cmd/stack"
	"github.com/countersign/countersign/executor/policy"
)

// TestActiveBundleGaugeFollowsTheFleet: on two sidecars sharing a
// PostgreSQL store, a bundle activated through one is the one
// countersign_active_bundle names on the other, alone, at its next scrape,
// though the other has decided nothing since: before any bundle, no
// series; after p1, p1's; after p3, p3's and no longer p1's.
func TestActiveBundleGaugeFollowsTheFleet(t *testing.T) {
	a, b, tokens := twoMembers(t)
	if got := activeBundles(t, b.URL); len(got) != 0 {
		t.Fatalf("member b before any bundle: %q, want no series", got)
	}
	for _, rev := range []string{"p1", "p3"} {
		archive, err := bundles.Archive(rev)
		if err != nil {
			t.Fatal(err)
		}
		loaded, err := policy.LoadArchive(archive)
		if err != nil {
			t.Fatal(err)
		}
		if status, code := uploadBundle(t, a.URL, tokens["ops-ida"], archive); status != http.StatusCreated {
			t.Fatalf("%s through member a: %d %s, want 201", rev, status, code)
		}
		want := [][]string{{loaded.Digest(), rev, "1"}}
		for name, st := range map[string]*stack.Stack{"a": a, "b": b} {
			if got := activeBundles(t, st.URL); len(got) != 1 || len(got[0]) != 4 || got[0][1] != want[0][0] || got[0][2] != rev || got[0][3] != "1" {
				t.Errorf("member %s after %s was activated through a: %q, want %q", name, rev, got, want)
			}
		}
	}
}

var activeBundleSeries = regexp.MustCompile(`(?m)^countersign_active_bundle\{digest="([^"]*)",revision="([^"]*)"\} (\S+)$`)

// activeBundles scrapes the sidecar at url and returns the series of
// countersign_active_bundle: digest, revision and value.
func activeBundles(t *testing.T, url string) [][]string {
	t.Helper()
	res, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	page, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %d", res.StatusCode)
	}
	return activeBundleSeries.FindAllStringSubmatch(string(page), -1)
}
