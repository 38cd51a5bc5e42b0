// Package buildinfo says which build of countersign is running: the
// module version, the VCS revision it was built from, the Go toolchain and
// the OPA version compiled in. `countersign version`, the /readyz answer
// and the countersign_build_info gauge all read it here, so the three
// never disagree.
//
// Everything comes from runtime/debug.ReadBuildInfo. A field the build did
// not record reads "unknown": .ci/run builds with -buildvcs=false, so a CI
// binary has no revision, and `go test` binaries have no module version.
package buildinfo
