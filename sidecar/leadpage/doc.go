// Package leadpage is the lead's approval page: server-rendered HTML
// (html/template, templates embedded), with one small script that keeps
// the queue fresh, on the sidecar, for the person who answers
// REQUIRE_APPROVAL without writing JSON.
//
//	GET  /login                    the sign-in page: "Sign in with your identity
//	                               provider" (Options.SignIn); in dev mode also a
//	                               pasted token and one button per fixture lead;
//	                               with neither, how to configure sign-in
//	GET  /login/oidc               to the identity provider (package signin)
//	GET  /login/callback           back from it: a session, then the queue
//	POST /login                    dev mode: sign in with a pasted token; 303 to /approvals
//	GET  /approvals                the queue: what this person may decide, and
//	                               apart, what they may not and why; ?view=decided
//	                               is what they decided and what became of it;
//	                               ?status, ?region, ?rep filter, ?sort=time_left
//	                               (or oldest, newest) orders
//	GET  /approvals/fragment       the same query's queue alone, for the script
//	                               (ETag; 304 when unchanged)
//	GET  /approvals/page.js        the script
//	POST /approvals/{id}/approve   through engine.Approve, as POST /v1/approvals/{id}/approve
//	POST /approvals/{id}/reject    through engine.Reject, as POST /v1/approvals/{id}/reject
//	POST /logout                   end the session; 303 to /login
//
// # What a card shows
//
// Beside the call and the order: the policy revision and digest of the
// decision that asked, the totals that decision was given (the rep's day)
// read back from the decision log rather than looked up again, what is
// still refundable on the order, and the refunds already on it (the
// store's list per order). Each Approve and Reject button's accessible
// name names its request ("Approve refund of $300.00 on O-1002 for
// rep-ben"), the comment box has a visible label, and every button fits
// a 390 px screen.
//
// # Fresh without a reload
//
// page.js asks for /approvals/fragment every Options.Refresh (5 s) while
// the tab is visible and puts it in place, keeping each card whose
// version (a hash of what it shows) is unchanged as it is, so a comment
// being typed and the focus survive. Polling rather than a stream: it
// works the same behind any proxy and across a fleet of sidecars, where
// the change may have been committed by another one. Without JavaScript
// the page is the same and a reload shows what changed.
//
// # One set of rules
//
// The page decides nothing. A token is verified by the same Verifier as
// every /v1 request; approve and reject are the engine's calls that the
// API makes, so the approval floor (a lead, not the requester) and the
// approver rules of the active bundle apply with the same codes, and a refused attempt shows the API's status, code and
// message (Options.Explain is the API's own error mapping). The approver
// is always the session's person, never a form field.
//
// # Sessions
//
// A session is a server-side record under a random 256-bit id, holding
// only the token (a bearer token, or the OpenID Connect ID token it
// signed in with, marked as such), the session's CSRF token and its end,
// which is the token's exp. A sidecar alone on its store keeps sessions in memory (a
// restart signs everyone out, the safe direction). Sidecars sharing a
// PostgreSQL store keep them in it (NewStoreSessions), so that a lead
// signed in on one is signed in on every one behind a load balancer, and
// signing out on one signs out on all; there the id is stored only as its
// SHA-256 and the token only sealed with the fleet's key-encryption key,
// so a reader of the database cannot use either (see storeSessions). The
// cookie that names
// it is HttpOnly and SameSite=Strict for the whole site, and Secure when
// the request came over TLS. Every request verifies the token again, so a
// token past its exp or signed by a key the issuer rotated out ends the
// session at once, and POST /logout ends it on the server, so a copied
// cookie is worth nothing after sign-out.
//
// Who may sign in: through the identity provider, a lead only (its ID
// token's claims map to the person as a bearer token's do). With a pasted
// token (dev mode), a lead, to decide, or an operator, to look (the queue
// without buttons; an operator's attempt is refused by the engine's
// approval floor, 403 forbidden_role, whatever the bundle's approver rules
// say). A rep is refused at sign-in (403 forbidden_role).
//
// The sign-in at the provider travels in a cookie of its own
// (countersign_oidc: HttpOnly, SameSite=Lax, for /login/callback only, 10
// minutes): Strict would not be sent on the provider's redirect back,
// which another site starts. For the same reason the callback sets the
// session's cookie on a page that continues to the queue by itself
// (meta refresh) rather than by a redirect, which would still belong to
// the provider's navigation.
//
// # Refusals, in the order they are checked
//
//	GET /login/oidc, /login/callback
//	  oidc_not_configured 404  no identity provider is configured
//	GET /login/callback
//	  (signin's codes)         oidc_state_invalid 400, oidc_provider_error,
//	                           oidc_exchange_failed, oidc_id_token_invalid,
//	                           token_expired, oidc_nonce_invalid, bad_claims 401
//	  forbidden_role      403  the ID token names someone who is not a lead
//	POST /login
//	  token_sign_in_disabled 403  not dev mode: sign in with the identity provider
//	  csrf_token_invalid  403  the form's csrf field differs from the countersign_login
//	                           cookie the form came with (double submit: there is no
//	                           session yet)
//	  invalid_request     400  dev sign-in for someone not offered
//	  token_*, ...        401  the token's authn code, as /v1 answers it
//	  forbidden_role      403  the token is a rep's
//	every other route
//	  (303 to /login)          no session, a session past its token's exp, or a token
//	                           that no longer verifies (the reason is on the sign-in page)
//	  csrf_token_invalid  403  a POST whose csrf field is not the session's CSRF token
//	                           (compared in constant time); nothing changes
//	  the API's code           what POST /v1/approvals/{id}/approve|reject would answer
//
// Every page is sent with a Content-Security-Policy that allows its one
// stylesheet (by hash), scripts and fetches of this origin only (page.js
// is a file: no inline script), and forms posting to this origin,
// nothing else, and with Cache-Control: no-store.
package leadpage
