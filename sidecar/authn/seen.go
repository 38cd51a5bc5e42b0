package authn

import (
	"context"
	"crypto"
	"slices"
	"sync"
	"time"
)

// Verified tokens are remembered so that an agent's token, presented on
// every call, is not verified again on every call: the signature check is
// the largest cost of a request. An entry answers only for the exact token
// string, only between the moment it was verified and the earlier of its
// exp (with the leeway) and seenTTL later, and only while its issuer still
// holds the very key that verified it: an expired token is refused exactly
// as before, and so is a token whose key the issuer rotated out.
const (
	seenTTL = time.Minute
	seenMax = 4096 // entries; the map is emptied when full
)

type seenTokens struct {
	mu      sync.Mutex
	entries map[string]seenToken
}

type seenToken struct {
	p        Principal
	from, to time.Time
	issuer   *trustedIssuer
	kid      string
	thumb    string // the verifying key's SHA-256 thumbprint
}

func (s *seenTokens) get(ctx context.Context, raw string, now time.Time) (Principal, bool) {
	s.mu.Lock()
	e, ok := s.entries[raw]
	s.mu.Unlock()
	if !ok || now.Before(e.from) || !now.Before(e.to) {
		return Principal{}, false
	}
	key, ok := e.issuer.lookup(ctx, e.kid)
	if !ok {
		return Principal{}, false
	}
	if thumb, err := key.Thumbprint(crypto.SHA256); err != nil || string(thumb) != e.thumb {
		return Principal{}, false
	}
	p := e.p
	p.Scopes = slices.Clone(p.Scopes)
	return p, true
}

func (s *seenTokens) put(raw string, p Principal, f *keyFinder, now time.Time, leeway time.Duration) {
	thumb, err := f.key.Thumbprint(crypto.SHA256)
	if err != nil {
		return
	}
	to := now.Add(seenTTL)
	if exp := p.Expires.Add(leeway); exp.Before(to) {
		to = exp
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.entries == nil || len(s.entries) >= seenMax {
		s.entries = make(map[string]seenToken)
	}
	s.entries[raw] = seenToken{p: p, from: now, to: to, issuer: f.issuer, kid: f.kid, thumb: string(thumb)}
}
