package actorcheck

import (
	"sync"
	"time"
)

// Replays remembers the jtis of accepted tokens. A receiver that keeps it
// in durable storage refuses a replay even after a restart.
type Replays interface {
	// Use records jti as used until exp and reports whether it was already
	// recorded. The check and the record are one atomic step: of two
	// concurrent uses of one jti, exactly one sees replayed false. Records
	// whose exp is before now may be forgotten: the token is refused as
	// expired anyway.
	Use(jti string, exp, now time.Time) (replayed bool, err error)
}

// MemoryReplays returns the Replays that Options.Replays defaults to: the
// jtis in this process's memory, each until its token's exp. A receiver
// with a durable store keeps the jtis of reads here: a read replayed after
// a restart answers what it answered before and moves nothing, so the
// single use of a token that only reads needs no commit (see the package
// doc, "Single use").
func MemoryReplays() Replays { return &memoryReplays{} }

// memoryReplays is the default Replays: a map, pruned of expired jtis
// whenever it has doubled since the last pruning.
type memoryReplays struct {
	mu    sync.Mutex
	until map[string]time.Time
	prune int // prune when the map reaches this size
}

var _ Replays = (*memoryReplays)(nil)

func (m *memoryReplays) Use(jti string, exp, now time.Time) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.until == nil {
		m.until = map[string]time.Time{}
	}
	if _, seen := m.until[jti]; seen {
		return true, nil
	}
	if len(m.until) >= m.prune {
		for k, t := range m.until {
			if t.Before(now) {
				delete(m.until, k)
			}
		}
		m.prune = max(1024, 2*len(m.until))
	}
	m.until[jti] = exp
	return false, nil
}
