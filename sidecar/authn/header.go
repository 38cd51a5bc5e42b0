package authn

import "strings"

// FromHeader returns the token of an Authorization header value of the form
// "Bearer <token>": the scheme is case-insensitive, followed by exactly one
// space and one token with no further spaces. An absent header, another
// scheme or no token is token_missing; more than one token, or more than
// one space, is token_malformed.
func FromHeader(h string) (string, error) {
	if h == "" {
		return "", refuse(CodeTokenMissing, "no Authorization header: send Authorization: Bearer <token> with a token from the identity provider", nil)
	}
	scheme, tok, _ := strings.Cut(h, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", refuse(CodeTokenMissing, "the Authorization header does not use the Bearer scheme: send Authorization: Bearer <token>", nil)
	}
	if tok == "" {
		return "", refuse(CodeTokenMissing, "the Authorization header has no token after Bearer: send Authorization: Bearer <token>", nil)
	}
	if strings.ContainsAny(tok, " \t\r\n") {
		return "", refuse(CodeTokenMalformed, "the Authorization header must be Bearer, one space, and exactly one token", nil)
	}
	return tok, nil
}
