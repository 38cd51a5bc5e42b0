package leadpage

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"sync"
	"time"

	"github.com/countersign/countersign/executor/clock"
)

// Session is what the server keeps for one signed-in browser: only what
// the page needs. The token is kept so that every request verifies it
// again (its expiry, a rotated issuer key); the person's claims are not
// kept, they are read from the token each time.
type Session struct {
	Token   string    // the bearer token the person signed in with
	CSRF    string    // the token every form of this session carries
	Expires time.Time // the token's exp: the session ends then
	Notice  string    // shown once, on the next page (after a redirect)
}

// Sessions keep the signed-in browsers under their ids: in memory for one
// sidecar (NewMemorySessions), in the store for a fleet that shares one
// (NewStoreSessions).
type Sessions interface {
	// Create starts a session for token, valid until expires, and returns
	// its fresh random id. Sessions past their expiry are deleted on the
	// way, so the sessions kept are no more than those alive.
	Create(ctx context.Context, token string, expires time.Time) (string, Session, error)
	// Get returns the session of id, or ErrNoSession; the caller checks
	// its expiry (and ends it when past).
	Get(ctx context.Context, id string) (Session, error)
	// SetNotice leaves a notice for the session's next page.
	SetNotice(ctx context.Context, id, notice string) error
	// TakeNotice returns the session's notice and clears it.
	TakeNotice(ctx context.Context, id string) (string, error)
	// End deletes the session; ending one that is not there is no error.
	End(ctx context.Context, id string) error
}

// memorySessions are the signed-in browsers, in memory: a restart signs
// everyone out, which is the safe direction.
type memorySessions struct {
	clock clock.Clock
	mu    sync.Mutex
	byID  map[string]Session
}

var _ Sessions = (*memorySessions)(nil)

// NewMemorySessions keeps sessions in this process, for a sidecar that is
// alone on its store; c is the now of expiry (nil, the wall clock).
func NewMemorySessions(c clock.Clock) Sessions {
	if c == nil {
		c = clock.Wall{}
	}
	return &memorySessions{clock: c, byID: map[string]Session{}}
}

func (s *memorySessions) Create(_ context.Context, token string, expires time.Time) (string, Session, error) {
	id, csrf := randomToken(), randomToken()
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, v := range s.byID {
		if !now.Before(v.Expires) {
			delete(s.byID, k)
		}
	}
	ss := Session{Token: token, CSRF: csrf, Expires: expires}
	s.byID[id] = ss
	return id, ss, nil
}

func (s *memorySessions) Get(_ context.Context, id string) (Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, ok := s.byID[id]
	if !ok {
		return Session{}, ErrNoSession
	}
	return ss, nil
}

func (s *memorySessions) TakeNotice(_ context.Context, id string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, ok := s.byID[id]
	if !ok {
		return "", nil
	}
	n := ss.Notice
	ss.Notice = ""
	s.byID[id] = ss
	return n, nil
}

func (s *memorySessions) SetNotice(_ context.Context, id, notice string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ss, ok := s.byID[id]; ok {
		ss.Notice = notice
		s.byID[id] = ss
	}
	return nil
}

func (s *memorySessions) End(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byID, id)
	return nil
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

// sessionError wraps a failure of Sessions with the operation.
func sessionError(op string, err error) error {
	return fmt.Errorf("leadpage: %s session: %w", op, err)
}
