package simserver

import (
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/countersign/countersign/executor/sim/actorcheck"
)

// A system's handlers authenticate a token with Verifier.Authenticate and
// then end every request that got that far in exactly one of [Core.Act]
// (the request is served) or [Core.Refuse] (it is not): both record the
// token's jti durably before the answer, and both answer 401
// token_replayed, whatever else they would have answered, when it was
// recorded already. A request that only reads ends in [Core.Read] or
// [Core.RefuseRead] instead, which keep the jti in memory and commit
// nothing. So the single-use check still comes before anything
// about the request, a replayed token never acts, and a served request
// costs one commit, shared with the requests committed beside it.

// Update runs fn in a write transaction shared with concurrent requests
// (package groupcommit): fn may run more than once, so it sets its results afresh on
// every run and returns an error only when nothing may be kept.
func (c *Core) Update(fn func(*bolt.Tx) error) error {
	return c.group.Update(fn)
}

// Act serves a request whose token authenticated as claims: in one shared
// write transaction it checks that the token has not expired meanwhile
// (the answer is then 401 token_expired and nothing is recorded), records
// the token's jti and, unless the jti was recorded already (the answer is
// then actorcheck.Replayed and fn does not run), runs fn, which reads or
// writes what the request asks. fn follows Update's rules; an answer it
// gives the request (not found, conflict) is a result it keeps, never an
// error, so that the jti stays recorded.
//
// The expiry is checked here, in the transaction that commits the effect,
// and not only when the request arrived: a request held up on the way (by
// the injected delay, or by a queue of writers) acts only while its token
// stands, which is what lets countersign conclude, once every token of a
// step has expired, that no request of it can still land.
func (c *Core) Act(claims actorcheck.Claims, fn func(*bolt.Tx) error) error {
	var seen bool
	var expired error
	err := c.group.Update(func(tx *bolt.Tx) (err error) {
		if expired = claims.Unexpired(c.Clock.Now()); expired != nil {
			return nil
		}
		if seen, err = c.record(tx, claims); err != nil || seen {
			return err
		}
		return fn(tx)
	})
	switch {
	case err != nil:
		return err
	case expired != nil:
		return expired
	case seen:
		return actorcheck.Replayed()
	}
	return nil
}

// Read serves a request that only reads, whose token authenticated as
// claims: it checks that the token has not expired, uses up its jti in
// memory (Core's reads; a jti used already is actorcheck.Replayed, and fn
// does not run), and runs fn in a read transaction. It commits nothing: a
// read replayed after a restart reads again what it read, and moves no
// value, so only writes need their jti on disk (actorcheck's doc, "Single
// use"). The token's scope must allow no write.
func (c *Core) Read(claims actorcheck.Claims, fn func(*bolt.Tx) error) error {
	if err := claims.Unexpired(c.Clock.Now()); err != nil {
		return err
	}
	if err := c.useRead(claims); err != nil {
		return err
	}
	return c.DB.View(fn)
}

// RefuseRead is Refuse for a request that Read would have served: the
// jti is used up in memory.
func (c *Core) RefuseRead(claims actorcheck.Claims, refusal error) error {
	if err := c.useRead(claims); err != nil {
		return err
	}
	return refusal
}

// useRead uses up the jti of claims in memory, unless the single-use
// check is off: actorcheck.Replayed when it was used already.
func (c *Core) useRead(claims actorcheck.Claims) error {
	if !c.singleUse {
		return nil
	}
	seen, err := c.reads.Use(claims.ID, claims.Expiry, c.Clock.Now())
	switch {
	case err != nil:
		return fmt.Errorf("recording the token's jti: %w", err)
	case seen:
		return actorcheck.Replayed()
	}
	return nil
}

// Refuse answers refusal to a request whose token authenticated as claims
// but which is not served (a malformed body, a token that does not cover
// it): the jti is used up all the same, as a token accepted in every
// respect of its own. If it was used already, the answer is
// actorcheck.Replayed instead, as it would have been before the request
// was looked at.
func (c *Core) Refuse(claims actorcheck.Claims, refusal error) error {
	if !c.singleUse {
		return refusal
	}
	if err := c.useRead(claims); err != nil {
		return err // used by a read already: replayed comes first
	}
	if err := c.Act(claims, func(*bolt.Tx) error { return nil }); err != nil {
		return err
	}
	return refusal
}

// record records the jti of claims until its expiry, unless the single-use
// check is off.
func (c *Core) record(tx *bolt.Tx, claims actorcheck.Claims) (seen bool, err error) {
	if !c.singleUse {
		return false, nil
	}
	seen, err = record(tx, claims.ID, claims.Expiry, c.Clock.Now())
	if err != nil {
		return false, fmt.Errorf("recording the token's jti: %w", err)
	}
	return seen, nil
}
