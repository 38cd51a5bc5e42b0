package store

import (
	bolt "go.etcd.io/bbolt"
)

// Batch runs fn in a write transaction it may share with other Batch
// calls (package groupcommit): one commit, one fsync pair, for all of
// them. It returns when the commit that holds fn's writes is durable, with
// fn's error or the commit's. fn may run more than once (when another
// function in its batch fails): it must compute everything from the
// transaction and return its outcome through variables it sets afresh on
// each run, with no effect outside the transaction.
func (db *DB) Batch(fn func(*Tx) error) error {
	return db.group.Update(func(tx *bolt.Tx) error { return fn(&Tx{tx: tx}) })
}

// Enqueue queues fn like Batch and returns at once; fn's outcome arrives
// on the channel when the commit that holds its writes is durable (or
// failed). The engine uses it for a record it may answer before it is
// durable because it can be recovered without it.
func (db *DB) Enqueue(fn func(*Tx) error) <-chan error {
	return db.group.Enqueue(func(tx *bolt.Tx) error { return fn(&Tx{tx: tx}) })
}

// Flush waits until every write queued before it is committed or failed.
func (db *DB) Flush() { db.group.Flush() }
