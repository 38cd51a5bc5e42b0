// Package authn authenticates the people behind every /v1 request of the
// sidecar: representatives (whose agent presents their token), leads and
// operators. Their bearer tokens come from a trusted identity provider (in
// dev mode, the built-in dev issuer of executor/sim/idp).
//
// # What is checked
//
// Verify takes a compact JWS and refuses it, with a stable Code, unless all
// of the following hold, checked in this order:
//
//	token_malformed      it is header.payload.signature; the header is
//	                     unpadded base64url of a JSON object that names each
//	                     member once, in one case, at any depth; it has no
//	                     crit (we understand no JWS extension)
//	alg_not_allowed      alg is EdDSA, ES256 or RS256 (never none, never HMAC)
//	wrong_issuer         iss is one of Options.Issuers
//	unknown_kid          the issuer has a key with the header's kid
//	bad_signature        the signature verifies with that key
//	token_malformed      the payload is a JSON object that names each member
//	                     once, in one case, at any depth
//	bad_claims           exp, nbf and iat, where present, are JSON numbers
//	                     (never "1796000000", which jwx would honour)
//	exp_missing          exp is present
//	token_expired        exp is after now (less Options.Leeway)
//	token_not_yet_valid  nbf and iat are not in the future
//	wrong_audience       aud contains "countersign"
//	bad_claims           sub is 1 to MaxSubjectBytes bytes without white
//	                     space, control or formatting characters (it is
//	                     stored as a workflow's user), and a username by
//	                     PRECIS UsernameCaseMapped (identity.Canonical: the
//	                     form every same-person check compares; the
//	                     principal keeps the sub as presented); role is
//	                     rep, lead or operator; scopes is an array of strings;
//	                     refund_ceiling and approve_limit are non-negative
//	                     integers (cents, never a float or a string)
//
// FromHeaders adds token_missing for a request without a Bearer header, and
// token_malformed for one with two Authorization headers (a proxy and the
// sidecar could each read a different one). FromHeader reads one value.
//
// Duplicate and case-variant member names are refused as request bodies are
// (executor/strictjson): Go and jwx keep the last of two "role" members,
// other readers the first, so a token whose meaning depends on the reader
// has none.
//
// Every refusal is an *Error that matches ErrUnauthenticated; the API
// answers 401 with its code and message, and WWW-Authenticate: Bearer.
//
// The header and the issuer are read before the signature is checked.
// Refusing on unverified data is safe; accepting is not, so acceptance
// always follows a verified signature with a key the caller chose (the
// trusted issuer's key for the kid, used with the header's alg only when
// that alg is allowed and matches the key's type and alg).
//
// # Where keys come from
//
// Each Issuer has one source: a JWKS file, a JWKS URL, or an in-memory
// jwk.Set. URLs are kept by jwx's jwk.Cache and refreshed in the background.
// A token naming an unknown kid makes the Verifier reload the issuer's
// source once (at most once per Options.RefetchGap, per issuer) so a key
// rotation at the issuer is picked up at once, while a flood of made-up kids
// cannot become a flood of fetches.
//
// # What is not checked here
//
// What the person may do (role, scope, region, limits) is policy, decided
// by the policy engine with the Principal as input. Actor tokens minted by
// executor/credential (iss "countersign") are not people's tokens and are
// refused here as wrong_issuer.
package authn
