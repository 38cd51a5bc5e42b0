// Package leadpage is the lead's approval page: server-rendered HTML
// (html/template, templates embedded, no script) on the sidecar, for the
// person who answers REQUIRE_APPROVAL without writing JSON.
//
//	GET  /login                    the sign-in form: paste a bearer token; in dev
//	                               mode also one button per fixture lead
//	POST /login                    sign in; 303 to /approvals
//	GET  /approvals                the queue: what this person may decide, and
//	                               apart, what they may not and why
//	POST /approvals/{id}/approve   through engine.Approve, as POST /v1/approvals/{id}/approve
//	POST /approvals/{id}/reject    through engine.Reject, as POST /v1/approvals/{id}/reject
//	POST /logout                   end the session; 303 to /login
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
// only the token, the session's CSRF token and its end, which is the
// token's exp. A sidecar alone on its store keeps sessions in memory (a
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
// Who may sign in: a lead, to decide, or an operator, to look (the queue
// without buttons; an operator's attempt is refused by the engine's
// approval floor, 403 forbidden_role, whatever the bundle's approver rules
// say). A rep's token is refused at sign-in (403 forbidden_role).
//
// # Refusals, in the order they are checked
//
//	POST /login
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
// stylesheet (by hash) and forms posting to this origin, nothing else, and
// with Cache-Control: no-store.
package leadpage
