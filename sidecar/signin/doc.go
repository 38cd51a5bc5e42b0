// Package signin signs a lead in to the approval page with the
// organisation's OpenID Connect provider: the authorization code flow
// with PKCE (S256), on github.com/coreos/go-oidc/v3 and
// golang.org/x/oauth2. The page (sidecar/leadpage) drives it:
//
//	GET /login/oidc      Begin: a fresh Attempt (state, nonce, PKCE
//	                     verifier) kept in the browser's short-lived
//	                     sign-in cookie, and a 302 to the provider
//	GET /login/callback  Finish: the provider's answer checked against
//	                     that Attempt, the code exchanged, the ID token
//	                     verified and its claims mapped to the person
//
// # The person
//
// An ID token's claims name the person exactly as a bearer token's do
// (authn.PersonOf: sub, role, region, scopes, approve_limit,
// refund_ceiling, with the same checks), so the provider must put the
// same claims in the ID token it issues to this client as in the bearer
// tokens of the API. Which role may use the page is the page's rule.
//
// # Refusals, in the order Finish checks them
//
//	oidc_state_invalid     400  no sign-in was begun in this browser (the cookie
//	                            is missing or expired), or the state differs:
//	                            another tab's attempt, or a forged callback
//	oidc_provider_error    401  the provider answered with an error (the person
//	                            declined, or is not assigned to the client)
//	oidc_exchange_failed   401  the token endpoint refused the code and verifier
//	                            (502 when it could not be reached)
//	oidc_id_token_invalid  401  no ID token, or one whose signature, issuer,
//	                            audience (the client id) or alg does not verify
//	token_expired          401  the ID token's exp has passed
//	oidc_nonce_invalid     401  the ID token's nonce is not this attempt's:
//	                            go-oidc's Verify does not check it, Finish does
//	token_malformed,       401  its claims do not name a person (authn.PersonOf)
//	bad_claims
//
// Verify, on every later request of the session, makes the same ID token
// checks but the nonce's.
//
// # Why the attempt lives in a cookie
//
// The browser that leaves for the provider comes back to the callback,
// possibly on another sidecar of the fleet; the attempt travels with it
// rather than in server state. Its values are random and the browser's
// own: a person who alters them only fails their own sign-in. The state
// ties the callback to the browser that began (login CSRF), the PKCE
// verifier ties the code to it (a stolen code is useless elsewhere), and
// the nonce ties the ID token to it (a replayed token is refused).
package signin
