package policy

import (
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
)

// A decision must depend only on its input and the bundle's data: a policy
// that can reach outside could post every input to a listener, and one that
// reads the clock answers the gate (which evaluates at a fixed time) one way
// and production another. So every compile of a bundle (its production
// queries, and the gate's run of its tests) uses Capabilities, which is
// OPA's built-in list for this version minus the denylist below.
//
// The allowlist is derived by removal rather than written out name by name
// so that it follows OPA's own marking: every built-in OPA flags as
// non-deterministic (http.send, net.lookup_ip_addr, opa.runtime, rand.intn,
// time.now_ns, uuid.rfc4122, io.jwt.decode_verify and encode_sign*,
// json.match_schema and verify_schema, which may fetch a remote $ref) is
// left out, including any a later OPA adds. The families and names below
// are left out on top of that:
//   - http., net.: the network (net.cidr_* are pure, but nothing here needs
//     them and a family is easier to review than a list);
//   - opa.: the runtime, which exposes the environment;
//   - rand., uuid.: randomness;
//   - io.jwt.: token checks read the clock and signing reads randomness;
//     policy gets facts from the engine, never from tokens;
//   - time.now_ns: the clock (the approver policy reads input.now);
//   - crypto.x509.parse_and_verify_certificates*: verify against the clock;
//   - trace, print, internal.print: write to the host's logs. (A print
//     statement compiles to nothing when print is disabled, as here.)
var (
	deniedPrefixes = []string{"http.", "net.", "opa.", "rand.", "uuid.", "io.jwt."}
	deniedNames    = []string{
		"time.now_ns",
		"crypto.x509.parse_and_verify_certificates",
		"crypto.x509.parse_and_verify_certificates_with_options",
		"trace", "print", "internal.print",
	}
)

// Capabilities returns the capabilities every bundle is compiled with: a
// fresh copy, which callers may modify.
func Capabilities() *ast.Capabilities {
	caps := ast.CapabilitiesForThisVersion()
	caps.Builtins = slices.DeleteFunc(caps.Builtins, func(b *ast.Builtin) bool { return denied(b) })
	return caps
}

// denied reports whether a built-in is outside the allowlist.
func denied(b *ast.Builtin) bool {
	if b.Nondeterministic || slices.Contains(deniedNames, b.Name) {
		return true
	}
	return slices.ContainsFunc(deniedPrefixes, func(p string) bool { return strings.HasPrefix(b.Name, p) })
}

// allCapabilities is what an engine without the allowlist compiles with
// (Options.UnrestrictedBuiltins, a test knob).
func allCapabilities() *ast.Capabilities { return ast.CapabilitiesForThisVersion() }

// forbiddenIn finds, among compile errors under Capabilities, the first
// call of a built-in the allowlist leaves out. OPA reports such a call as
// "undefined function NAME"; a name that is not a denied built-in (a typo,
// a missing rule) is an ordinary compile error, and nil is returned.
func forbiddenIn(errs ast.Errors) *ForbiddenBuiltinError {
	const prefix = "undefined function "
	for _, e := range errs {
		name, ok := strings.CutPrefix(e.Message, prefix)
		if !ok || !isDeniedBuiltin(name) {
			continue
		}
		fe := &ForbiddenBuiltinError{Builtin: name}
		if e.Location != nil {
			fe.File, fe.Row = e.Location.File, e.Location.Row
		}
		return fe
	}
	return nil
}

func isDeniedBuiltin(name string) bool {
	b, ok := ast.BuiltinMap[name]
	return ok && denied(b)
}
