package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// AuditCheckpoints reads the audit's signed checkpoints after position
// after (0: all), oldest first.
func (c *Client) AuditCheckpoints(ctx context.Context, after uint64) (AuditCheckpoints, error) {
	v := url.Values{}
	if after != 0 {
		v.Set("after", strconv.FormatUint(after, 10))
	}
	var p AuditCheckpoints
	err := c.call(ctx, http.MethodGet, "/v1/audit/checkpoints", v, nil, &p)
	return p, err
}

// AuditCheckpoints is GET /v1/audit/checkpoints.
type AuditCheckpoints struct {
	Checkpoints []AuditCheckpoint `json:"checkpoints"`
}

// AuditCheckpoint is a signed statement that the first Position records
// of the audit log end with record ID, whose hash is Head. Sig is Ed25519
// (base64url) over the RFC 8785 form of the other members, by the key Kid
// of GET /.well-known/countersign-audit-keys.
type AuditCheckpoint struct {
	Position uint64    `json:"position"`
	ID       string    `json:"id"`
	Head     string    `json:"head"`
	At       time.Time `json:"at"`
	Kid      string    `json:"kid"`
	Sig      string    `json:"sig"`
}

// AuditKeys is GET /.well-known/countersign-audit-keys: the public keys
// that sign the audit's checkpoints, as a JWK set.
type AuditKeys struct {
	Keys []AuditKey `json:"keys"`
}

// AuditKey is an Ed25519 public key as RFC 8037 writes it: Kty "OKP", Crv
// "Ed25519", X the key in base64url; Kid its RFC 7638 thumbprint.
type AuditKey struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Kid string `json:"kid"`
	Alg string `json:"alg"`
	Use string `json:"use"`
}
