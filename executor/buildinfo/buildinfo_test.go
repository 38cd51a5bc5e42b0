package buildinfo_test

import (
	"runtime/debug"
	"testing"

	"github.com/countersign/countersign/executor/buildinfo"
)

func TestFromBuildInfo(t *testing.T) {
	cases := []struct {
		name string
		in   debug.BuildInfo
		want buildinfo.Info
	}{
		{
			name: "a release build reports every field",
			in: debug.BuildInfo{
				GoVersion: "go1.26.8",
				Main:      debug.Module{Version: "v1.2.3"},
				Deps:      []*debug.Module{{Path: "github.com/open-policy-agent/opa", Version: "v1.22.3"}},
				Settings:  []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "true"}},
			},
			want: buildinfo.Info{Version: "v1.2.3", Revision: "abc123", Modified: true, GoVersion: "go1.26.8", OPAVersion: "v1.22.3"},
		},
		{
			name: "a build without VCS stamping or OPA reads unknown",
			in:   debug.BuildInfo{GoVersion: "go1.26.8"},
			want: buildinfo.Info{Version: "unknown", Revision: "unknown", GoVersion: "go1.26.8", OPAVersion: "unknown"},
		},
		{
			name: "a replaced OPA reports the replacement's version",
			in: debug.BuildInfo{
				GoVersion: "go1.26.8",
				Main:      debug.Module{Version: "(devel)"},
				Deps: []*debug.Module{{Path: "github.com/open-policy-agent/opa", Version: "v1.22.3",
					Replace: &debug.Module{Path: "example.com/opa", Version: "v1.22.4"}}},
			},
			want: buildinfo.Info{Version: "(devel)", Revision: "unknown", GoVersion: "go1.26.8", OPAVersion: "v1.22.4"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := buildinfo.FromBuildInfo(&tc.in); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// A test binary records no dependencies, yet knows which OPA it links.
func TestReadKnowsTheToolchainAndOPA(t *testing.T) {
	if got := buildinfo.Read(); got.GoVersion == buildinfo.Unknown || got.OPAVersion == buildinfo.Unknown {
		t.Errorf("Read() = %+v; every binary knows its Go and the OPA it links", got)
	}
}
