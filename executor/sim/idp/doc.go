// Package idp is the development identity provider: a stand-in for the
// organisation's real one (Okta, Entra, Keycloak ...), simulated in process
// like the ledger and the order system.
//
// It signs bearer tokens for the Quillfeather fixture people with their
// delegation claims, which the sidecar's authn package verifies exactly as it
// would verify a real provider's tokens:
//
//	header  alg EdDSA, kid "idp-1", typ JWT
//	iss     Options.Issuer (default "countersign-dev-idp")
//	aud     "countersign"
//	sub     the person's id (rep-ana, lead-dee, ops-ida ...)
//	role    "rep" | "lead" | "operator"
//	region  "EU" | "US" (absent for operators)
//	scopes  the operations a rep delegated, e.g. ["lookup","refund","reship"]
//	refund_ceiling  integer cents (reps), approve_limit integer cents (leads)
//	iat, exp, jti
//
// Its Ed25519 key is kept under Options.Dir/idp/key.json (directory 0700,
// file 0600) and reused on the next start, so tokens written to
// dev-tokens.json stay valid across restarts of `serve --dev`. Its public key
// is served as a JWKS (JWKSHandler) at the dev mode's issuer_jwks URL.
//
// It also speaks OpenID Connect (Provider: discovery, /authorize,
// /token, JWKS), so that the lead's page signs in through a real
// authorization code flow with PKCE, as it would at the organisation's
// provider. Its ID tokens carry the same person claims, with iss the
// provider's URL and aud the client's id, so they are never taken for
// bearer tokens of the API (whose iss is Options.Issuer and aud
// "countersign"). Its /authorize page lists the people to pick; a
// login_hint picks at once.
//
// It is for development and tests only: it signs whatever person it is
// given, with no login.
package idp
