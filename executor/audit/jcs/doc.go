// Package jcs writes JSON in the canonical form of RFC 8785, the JSON
// Canonicalization Scheme: the form a reviewer's own tool recomputes byte
// for byte, whatever language it is written in, which is why the audit
// chain hashes it (executor/audit).
//
// # The form
//
//   - No white space between tokens.
//   - Object members sorted by their names as arrays of UTF-16 code
//     units (so U+10000 and above sort by their surrogates, not by their
//     code points), each name once: a duplicate name is an error.
//   - Strings as UTF-8, escaping only what JSON requires: the quote, the
//     backslash, and the controls below U+0020 (\b \t \n \f \r by name,
//     the others as \u00xx in lower case). "<", ">", "&" and U+2028 stay
//     as they are (Go's encoding/json escapes them, the reason a hash over
//     its output did not recompute elsewhere).
//   - Numbers as IEEE 754 doubles written the way ECMAScript's
//     Number.prototype.toString writes them: 4.50 is 4.5, 1E30 is 1e+30,
//     2e-3 is 0.002, -0 is 0. A number beyond the double range is an
//     error; an integer beyond 2^53 is rounded to the nearest double, as
//     the RFC says (I-JSON), so a producer that needs exact large
//     integers writes them as strings.
//   - true, false and null as such.
//
// The tests hold the package to the RFC's own examples: the number table
// of its Appendix B and the examples of its section 3.2, kept in testdata.
//
// # What it does not check
//
// Go's decoder replaces invalid UTF-8 and lone surrogates with U+FFFD
// instead of refusing them as the RFC asks; Transform inherits that. The
// audit writes only text Go produced, which is valid UTF-8.
package jcs
