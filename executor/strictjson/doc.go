// Package strictjson is the one decoder of untrusted JSON in countersign: the
// sidecar's request bodies, the tool arguments an agent sends, and the bodies
// the simulated systems of record receive all pass through it.
//
// encoding/json alone is too forgiving for a body that moves money. It keeps
// the last of two members with the same name, and it matches "AMOUNT" or
// "Amount" to a field tagged "amount". Another reader of the same bytes (a
// proxy, a log pipeline, the policy engine, a system of record written in
// another language) may keep the first duplicate, or ignore the case-variant
// key, and so act on a different call than the one countersign checked. The
// only safe answer to an ambiguous body is to refuse it.
//
// # The refusals
//
// Checks run over the whole document before any value is decoded, so the
// answer does not depend on where in the body the flaw sits. An
// [ErrMalformed] anywhere wins over an [ErrUnknownField], which wins over an
// [ErrType]:
//
//	ErrMalformed     not JSON; data after the value; two members of one
//	(400)            object, at any depth, whose names are equal or equal
//	                 but for case ("a" and "A", "k" and "\u212a" KELVIN SIGN);
//	                 a member whose name equals a target field's JSON name
//	                 but for case ("Amount" for "amount")
//	ErrUnknownField  a member of a struct's object that no field of the
//	(422)            struct names
//	ErrType          a value of the wrong JSON type for its field, a number
//	(422)            that does not fit (3e3 or 30.5 into an integer), a body
//	                 that is not an object where one is expected
//
// Every refusal is an *[Error] that carries one of these sentinels, the path
// of the member (args.order) and what is wrong with it; callers branch with
// errors.Is and map the sentinel to their own status codes.
//
// "Equal but for case" is Unicode simple case folding, the same folding
// strings.EqualFold and encoding/json's field matching use, so every key
// encoding/json would have matched to a field is either exact or refused.
//
// # Two ways in
//
// [Decode] decodes into a Go value whose struct fields define the names;
// members the target keeps as json.RawMessage (or any other type with its own
// UnmarshalJSON, or an interface) are checked for syntax and duplicates only,
// and are decoded strictly later by whoever knows their schema.
//
// [Object] splits an object into its members for callers that take fields
// one at a time and decide numbers themselves (integer cents are parsed from
// the literal, never through float64); [Members.Take] refuses a case variant
// of the name it is asked for.
//
// The package imports nothing of countersign, so the simulated systems of
// record, which must not depend on the sidecar or the engine, use it too.
package strictjson
