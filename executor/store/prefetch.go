package store

import "time"

// A Read names a record a transaction is about to read, for Prefetch.
type Read struct {
	bucket, key []byte     // a record
	ranges      []keyRange // or a window total
	span        *keyRange  // or every record of a key range
	draw        int        // or that many numbers of bucket's sequence
}

// Prefetch reads ahead the records a transaction is about to read: on
// PostgreSQL in one round trip, where each read would otherwise be one of
// its own; the accessors then answer from what it read (and what the
// transaction has written since). A decision reads a dozen records before
// it writes, and under SERIALIZABLE prefetching them reads the same rows
// as reading them one by one, so it watches the same conflicts. On bbolt
// it does nothing.
func (t *Tx) Prefetch(reads ...Read) { t.kv.prefetch(reads) }

// ReadStep is Step(wf, n).
func ReadStep(wf string, n int) Read { return Read{bucket: bSteps, key: stepKey(wf, n)} }

// ReadWorkflow is Workflow(id).
func ReadWorkflow(id string) Read { return Read{bucket: bWorkflows, key: []byte(id)} }

// ReadCall is the call index entry of call in wf (a duplicate's check).
func ReadCall(wf, call string) Read { return Read{bucket: bCalls, key: callKey(wf, call)} }

// ReadCredentialEpoch is CredentialEpoch.
func ReadCredentialEpoch() Read { return Read{bucket: bCredentialKeys, key: keyCurrentEpoch} }

// ReadLease is Lease(wf).
func ReadLease(wf string) Read { return Read{bucket: bLeases, key: []byte(wf)} }

// ReadSwitch is Switch(tool).
func ReadSwitch(tool string) Read { return Read{bucket: bSwitches, key: []byte(tool)} }

// ReadMode is Mode(tool).
func ReadMode(tool string) Read { return Read{bucket: bModes, key: []byte(tool)} }

// ReadBreaker is Breaker(tool, version).
func ReadBreaker(tool, version string) Read {
	return Read{bucket: bBreakers, key: breakerKey(tool, version)}
}

// ReadActiveDigest is ActiveDigest, when the store records one.
func ReadActiveDigest() Read { return Read{bucket: bMeta, key: metaActiveBundle} }

// ReadOrderSpent is OrderSpent(order).
func ReadOrderSpent(order string) Read { return Read{bucket: bOrderSpent, key: []byte(order)} }

// ReadOrderReships is OrderReships(order).
func ReadOrderReships(order string) Read { return Read{bucket: bOrderReships, key: []byte(order)} }

// ReadRepSpent is RepSpentSince(rep, since).
func ReadRepSpent(rep string, since time.Time) Read {
	return Read{ranges: repSpent.ranges(repKey(rep), since)}
}

// ReadAgentSpent is AgentSpentSince(since).
func ReadAgentSpent(since time.Time) Read { return Read{ranges: agentSpent.ranges("", since)} }

// ReadSteps is Steps(wf): every step of workflow wf. Later reads of them
// in the transaction (Step, Steps, and the walk that refreshes the
// workflow after a step is written) answer from it, with the
// transaction's own writes laid over it. A workflow with more steps than
// one page is read as it would have been without.
func ReadSteps(wf string) Read {
	prefix := append([]byte(wf), 0)
	return Read{span: &keyRange{bucket: bSteps, lo: prefix, hi: prefixEnd(prefix)}}
}

// Numbers names a sequence of numbers the store hands out to records.
type Numbers int

const (
	DecisionNumbers Numbers = iota // PutDecision's
	AuditNumbers                   // AppendAudit's on a shared store (the places of pending records)
	WorkflowNumbers                // CreateWorkflow's (the listing order)
	FenceNumbers                   // NextFence's
)

var numbered = map[Numbers][]byte{DecisionNumbers: bDecisions, AuditNumbers: bAuditPending, WorkflowNumbers: bWorkflowsBySeq, FenceNumbers: bLeases}

// ReadNumbers draws n numbers of seq ahead: the next n records the
// transaction numbers from seq take them, with no round trip of their
// own. A number drawn and not taken is a gap, as the number of a
// transaction that rolled back is.
func ReadNumbers(seq Numbers, n int) Read { return Read{bucket: numbered[seq], draw: n} }

// Held is what a read transaction read of a workflow that this sidecar
// holds, fenced, under its lease (Tx.Held), for a write transaction of the
// same holding to take as read (Tx.Assume).
type Held struct {
	got   map[string]cachedValue
	spans []*span
}

// Held is what tx read of the records of reads (prefetched ones: others
// are left out).
func (t *Tx) Held(reads ...Read) Held { return t.kv.held(reads) }

// Assume takes h's records as this transaction's reads of them, without
// reading them again: on PostgreSQL a read of a key takes a predicate lock
// on its index page under SERIALIZABLE, and a workflow's new records
// (workflow, first step, call) are keys no one else reads, on pages many
// others write, so reading them again is what made concurrent decisions of
// different workflows abort each other. It is sound only for records that
// nobody but the holder writes, read after the lease was taken, in a
// transaction that checks the lease's fence (Tx.CheckFence): a takeover in
// between changes the fence, and the transaction fails with ErrFenced.
func (t *Tx) Assume(h Held) { t.kv.assume(h) }
