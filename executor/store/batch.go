package store

// Batch runs fn in a write transaction it may share with other Batch
// calls: on bbolt a group commit (package groupcommit), one commit and one
// fsync pair for all of them; on PostgreSQL a transaction of its own, as
// PostgreSQL already shares the WAL flush of concurrent commits. It
// returns when the commit that holds fn's writes is durable, with fn's
// error or the commit's. fn may run more than once (when another function
// in its batch fails, or as Update says): it must compute everything from
// the transaction and return its outcome through variables it sets afresh
// on each run, with no effect outside the transaction.
func (db *DB) Batch(fn func(*Tx) error) error {
	return db.kv.batch(func(k kvTx) error { return fn(&Tx{kv: k}) })
}

// BatchIn is Batch for a write that reads and writes the same rows as the
// other writes of lane (the decisions that spend the agent's hour, say):
// on PostgreSQL this process runs them one at a time, as concurrent ones
// would only abort each other under SERIALIZABLE; other processes' writes
// still meet them there. On bbolt it is Batch.
func (db *DB) BatchIn(lane string, fn func(*Tx) error) error {
	return db.kv.batchIn(lane, func(k kvTx) error { return fn(&Tx{kv: k}) })
}

// Enqueue queues fn like Batch and returns at once; fn's outcome arrives
// on the channel when the commit that holds its writes is durable (or
// failed). The engine uses it for a record it may answer before it is
// durable because it can be recovered without it.
func (db *DB) Enqueue(fn func(*Tx) error) <-chan error {
	return db.kv.enqueue(func(k kvTx) error { return fn(&Tx{kv: k}) })
}

// BatchRows is Batch, and EnqueueRows Enqueue, for a transaction of the
// kind UpdateRows runs: on PostgreSQL at REPEATABLE READ; on bbolt in the
// group commit as Batch and Enqueue.
func (db *DB) BatchRows(fn func(*Tx) error) error {
	return db.kv.batchRows(func(k kvTx) error { return fn(&Tx{kv: k}) })
}

func (db *DB) EnqueueRows(fn func(*Tx) error) <-chan error {
	return db.kv.enqueueRows(func(k kvTx) error { return fn(&Tx{kv: k}) })
}

// Flush waits until every write queued before it is committed or failed.
func (db *DB) Flush() { db.kv.flush() }
