package authn

import "strings"

// FromHeaders returns the token of a request's Authorization headers, all
// of them (http.Header.Values). Exactly one header is accepted: with two, a
// proxy in front of the sidecar and the sidecar itself may each act on a
// different token, so a second header is token_malformed however alike the
// two are. No header is token_missing; one header is read as FromHeader
// reads it.
func FromHeaders(values []string) (string, error) {
	switch len(values) {
	case 0:
		return FromHeader("")
	case 1:
		return FromHeader(values[0])
	}
	return "", refuse(CodeTokenMalformed, "the request has more than one Authorization header: send exactly one, Authorization: Bearer <token>", nil)
}

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
