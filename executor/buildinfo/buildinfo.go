package buildinfo

import (
	"runtime/debug"

	opaversion "github.com/open-policy-agent/opa/v1/version"
)

// Unknown stands for a field the build did not record.
const Unknown = "unknown"

// opaModule is the dependency whose version Info.OPAVersion reports.
const opaModule = "github.com/open-policy-agent/opa"

// Info is the build of the running binary. Its JSON form is the `version`
// object of /readyz and of `countersign version --json`.
type Info struct {
	// Version is the main module's version ("(devel)" for a build from a
	// working tree).
	Version string `json:"version"`
	// Revision is the VCS commit the binary was built from.
	Revision string `json:"revision"`
	// Modified is true when the working tree had uncommitted changes; it
	// is false when the build did not record VCS information at all.
	Modified   bool   `json:"modified"`
	GoVersion  string `json:"go_version"`
	OPAVersion string `json:"opa_version"`
}

// Read reports the running binary's build. A test binary records no
// dependencies, so there the OPA version comes from OPA's own version
// package, which every binary that links OPA carries.
func Read() Info {
	info := Info{Version: Unknown, Revision: Unknown, GoVersion: Unknown, OPAVersion: Unknown}
	if bi, ok := debug.ReadBuildInfo(); ok {
		info = FromBuildInfo(bi)
	}
	if info.OPAVersion == Unknown && opaversion.Version != "" {
		info.OPAVersion = "v" + opaversion.Version
	}
	return info
}

// FromBuildInfo is Read for a given build record; every field the record
// lacks reads Unknown.
func FromBuildInfo(bi *debug.BuildInfo) Info {
	info := Info{
		Version:    orUnknown(bi.Main.Version),
		Revision:   Unknown,
		GoVersion:  orUnknown(bi.GoVersion),
		OPAVersion: Unknown,
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Revision = orUnknown(s.Value)
		case "vcs.modified":
			info.Modified = s.Value == "true"
		}
	}
	for _, dep := range bi.Deps {
		if dep.Path != opaModule {
			continue
		}
		if dep.Replace != nil && dep.Replace.Version != "" {
			dep = dep.Replace
		}
		info.OPAVersion = orUnknown(dep.Version)
	}
	return info
}

func orUnknown(s string) string {
	if s == "" {
		return Unknown
	}
	return s
}
