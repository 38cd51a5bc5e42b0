package authn

import (
	"time"

	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/strictjson"
)

// PersonOf maps the payload of a token that another verifier has checked
// (its signature, issuer, audience and expiry) to the person it names,
// with the checks Verify makes of a bearer token's payload after those:
// each member named once in one case (token_malformed), exp, nbf and iat
// JSON numbers, and the person's claims well-typed (bad_claims: sub a
// PRECIS username, role rep, lead or operator, integer cents). It is how
// the lead page's OpenID Connect ID tokens, which go-oidc verifies, become
// the same Principal a bearer token would: one mapping of claims to
// people. issuer and expires are the verified token's iss and exp.
// Refusals are *Error values, as Verify's are.
func PersonOf(payload []byte, issuer string, expires time.Time) (Principal, error) {
	raw, err := strictjson.Object(payload)
	if err != nil {
		return Principal{}, ambiguous("payload", err)
	}
	if err := checkNumericDates(raw); err != nil {
		return Principal{}, err
	}
	c, claimErr := decodePersonClaims(raw)
	if claimErr != nil {
		return Principal{}, claimErr
	}
	if err := c.check(); err != nil {
		return Principal{}, err
	}
	return Principal{
		ID:            c.Sub,
		Role:          c.Role,
		Region:        c.Region,
		Scopes:        c.Scopes,
		RefundCeiling: money.Cents(c.RefundCeiling),
		ApproveLimit:  money.Cents(c.ApproveLimit),
		Issuer:        issuer,
		Expires:       expires,
	}, nil
}
