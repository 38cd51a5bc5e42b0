package leadpage

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"sync"
	"time"

	"github.com/countersign/countersign/executor/clock"
)

// session is what the server keeps for one signed-in browser: only what
// the page needs. The token is kept so that every request verifies it
// again (its expiry, a rotated issuer key); the person's claims are not
// kept, they are read from the token each time.
type session struct {
	token   string    // the bearer token the person signed in with
	csrf    string    // the token every form of this session carries
	expires time.Time // the token's exp: the session ends then
	notice  string    // shown once, on the next page (after a redirect)
}

// sessions are the signed-in browsers, in memory: a restart signs
// everyone out, which is the safe direction.
type sessions struct {
	clock clock.Clock
	mu    sync.Mutex
	byID  map[string]session
}

func newSessions(c clock.Clock) *sessions {
	return &sessions{clock: c, byID: map[string]session{}}
}

// create starts a session for token, valid until expires, and returns its
// id. Sessions past their expiry are dropped on the way, so the map holds
// no more than the sessions alive.
func (s *sessions) create(token string, expires time.Time) (string, session) {
	id, csrf := randomToken(), randomToken()
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, v := range s.byID {
		if !now.Before(v.expires) {
			delete(s.byID, k)
		}
	}
	ss := session{token: token, csrf: csrf, expires: expires}
	s.byID[id] = ss
	return id, ss
}

// get returns the session of id; the caller checks its expiry.
func (s *sessions) get(id string) (session, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, ok := s.byID[id]
	return ss, ok
}

// takeNotice returns the session's notice and clears it.
func (s *sessions) takeNotice(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, ok := s.byID[id]
	if !ok {
		return ""
	}
	n := ss.notice
	ss.notice = ""
	s.byID[id] = ss
	return n
}

// setNotice leaves a notice for the session's next page.
func (s *sessions) setNotice(id, notice string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ss, ok := s.byID[id]; ok {
		ss.notice = notice
		s.byID[id] = ss
	}
}

// end forgets the session.
func (s *sessions) end(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byID, id)
}

// randomToken is 256 random bits, URL-safe: session ids and CSRF tokens.
func randomToken() string {
	b := make([]byte, 32)
	rand.Read(b) // never fails (crypto/rand panics rather than return short)
	return base64.RawURLEncoding.EncodeToString(b)
}

// sameToken compares a token a request carries with the one expected, in
// time that does not depend on where they differ. An empty expected token
// matches nothing.
func sameToken(got, want string) bool {
	return want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}
