package store

import (
	"fmt"
	"time"
)

// bPageSessions holds the lead's page sessions when sidecars share the
// store, so that a browser signed in on one sidecar is signed in on all
// (package leadpage decides when). Keyed by what the page gives: a hash of
// the session id, never the id itself. The store keeps the record opaque
// as it is given: the token in it is sealed by the page under the fleet's
// key-encryption key.
var bPageSessions = []byte("page_sessions")

// A PageSession is one signed-in browser of the lead's page.
type PageSession struct {
	// SealedToken is the bearer token the person signed in with, sealed.
	SealedToken []byte    `json:"sealed_token"`
	CSRF        string    `json:"csrf"`
	Expires     time.Time `json:"expires"`
	// Notice is shown once, on the session's next page.
	Notice string `json:"notice,omitempty"`
}

// PageSession returns the session under key, or ErrNotFound.
func (t *Tx) PageSession(key []byte) (PageSession, error) {
	var s PageSession
	err := t.getJSON(bPageSessions, key, &s)
	return s, err
}

// PutPageSession writes s under key.
func (t *Tx) PutPageSession(key []byte, s PageSession) error {
	return t.putJSON(bPageSessions, key, s)
}

// DeletePageSession deletes the session under key; deleting one that is
// not there is no error.
func (t *Tx) DeletePageSession(key []byte) error {
	if err := t.bucket(bPageSessions).Delete(key); err != nil {
		return fmt.Errorf("delete page session: %w", err)
	}
	return nil
}

// DeleteExpiredPageSessions deletes the sessions whose Expires is not
// after now and returns how many it deleted.
func (t *Tx) DeleteExpiredPageSessions(now time.Time) (int, error) {
	var expired [][]byte
	err := t.bucket(bPageSessions).ForEach(func(k, v []byte) error {
		var s PageSession
		if err := decodeJSON(bPageSessions, k, v, &s); err != nil {
			return err
		}
		if !now.Before(s.Expires) {
			expired = append(expired, append([]byte(nil), k...))
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	for _, k := range expired {
		if err := t.DeletePageSession(k); err != nil {
			return 0, err
		}
	}
	return len(expired), nil
}
