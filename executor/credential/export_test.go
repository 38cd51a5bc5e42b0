package credential

import "crypto/ed25519"

// SigningKey is the private key a currently mints with, for the test that
// looks for it in the database.
func SigningKey(a *Authority) ed25519.PrivateKey { return a.cur.Load().priv }
