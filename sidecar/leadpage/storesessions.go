package leadpage

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"time"

	"github.com/countersign/countersign/executor/clock"
	"github.com/countersign/countersign/executor/credential"
	"github.com/countersign/countersign/executor/store"
)

// storeSessions keep the sessions in a store several sidecars share, so
// that a browser signed in on one sidecar is signed in on every other, and
// signing out on one signs out on all.
//
// What a reader of the database learns is worth nothing to sign in with:
//   - the session id is the key only as its SHA-256 (the id is 256 random
//     bits, so an unsalted hash cannot be reversed), and a request must
//     carry the id itself;
//   - the bearer token is sealed with the fleet's key-encryption key,
//     which the database never holds, under a label naming this row, so a
//     sealed token moved to another session's row does not open;
//   - the CSRF token is kept as it is, since every page prints it into
//     its forms; it is useless without the session cookie, whose id the
//     database does not hold.
type storeSessions struct {
	db    *store.DB
	kek   *credential.KeyEncryptionKey
	clock clock.Clock
}

var _ Sessions = (*storeSessions)(nil)

// NewStoreSessions keeps sessions in db, their tokens sealed with kek;
// c is the now of expiry (nil, the wall clock). For a fleet of sidecars on
// one shared store, each given the fleet's key-encryption key.
func NewStoreSessions(db *store.DB, kek *credential.KeyEncryptionKey, c clock.Clock) Sessions {
	if c == nil {
		c = clock.Wall{}
	}
	return &storeSessions{db: db, kek: kek, clock: c}
}

// sessionKey is the store's key of session id: its SHA-256.
func sessionKey(id string) []byte {
	sum := sha256.Sum256([]byte(id))
	return sum[:]
}

// tokenLabel binds a sealed token to the row it is kept under.
func tokenLabel(key []byte) string {
	return "leadpage session token " + hex.EncodeToString(key)
}

func (s *storeSessions) Create(_ context.Context, token string, expires time.Time) (string, Session, error) {
	id, csrf := randomToken(), randomToken()
	key := sessionKey(id)
	sealed, err := s.kek.Seal(tokenLabel(key), []byte(token))
	if err != nil {
		return "", Session{}, sessionError("create", err)
	}
	now := s.clock.Now()
	err = s.db.Update(func(tx *store.Tx) error {
		if _, err := tx.DeleteExpiredPageSessions(now); err != nil {
			return err
		}
		return tx.PutPageSession(key, store.PageSession{SealedToken: sealed, CSRF: csrf, Expires: expires})
	})
	if err != nil {
		return "", Session{}, sessionError("create", err)
	}
	return id, Session{Token: token, CSRF: csrf, Expires: expires}, nil
}

func (s *storeSessions) Get(_ context.Context, id string) (Session, error) {
	key := sessionKey(id)
	var rec store.PageSession
	err := s.db.View(func(tx *store.Tx) (err error) {
		rec, err = tx.PageSession(key)
		return err
	})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return Session{}, ErrNoSession
	case err != nil:
		return Session{}, sessionError("read", err)
	}
	token, err := s.kek.Open(tokenLabel(key), rec.SealedToken)
	if err != nil {
		return Session{}, sessionError("read", err)
	}
	return Session{Token: string(token), CSRF: rec.CSRF, Expires: rec.Expires, Notice: rec.Notice}, nil
}

func (s *storeSessions) SetNotice(_ context.Context, id, notice string) error {
	key := sessionKey(id)
	err := s.db.Update(func(tx *store.Tx) error {
		rec, err := tx.PageSession(key)
		if err != nil {
			return err
		}
		rec.Notice = notice
		return tx.PutPageSession(key, rec)
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return sessionError("set the notice of", err)
	}
	return nil
}

// TakeNotice reads first and writes only when there is a notice to
// clear: the queue takes one on every view, and most views have none.
func (s *storeSessions) TakeNotice(_ context.Context, id string) (string, error) {
	key := sessionKey(id)
	var notice string
	err := s.db.View(func(tx *store.Tx) error {
		rec, err := tx.PageSession(key)
		notice = rec.Notice
		return err
	})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return "", nil
	case err != nil:
		return "", sessionError("take the notice of", err)
	case notice == "":
		return "", nil
	}
	err = s.db.Update(func(tx *store.Tx) error {
		notice = ""
		rec, err := tx.PageSession(key)
		if err != nil {
			return err
		}
		notice, rec.Notice = rec.Notice, ""
		return tx.PutPageSession(key, rec)
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return "", sessionError("take the notice of", err)
	}
	return notice, nil
}

func (s *storeSessions) End(_ context.Context, id string) error {
	key := sessionKey(id)
	if err := s.db.Update(func(tx *store.Tx) error { return tx.DeletePageSession(key) }); err != nil {
		return sessionError("end", err)
	}
	return nil
}
