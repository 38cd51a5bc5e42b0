package store

import (
	bolt "go.etcd.io/bbolt"
)

// BatchAsync queues fn like Batch and returns at once, so that a test can
// hold a commit open and line writes up behind it.
func (db *DB) BatchAsync(fn func(*Tx) error) <-chan error {
	return db.group.Enqueue(func(tx *bolt.Tx) error { return fn(&Tx{tx: tx}) })
}
