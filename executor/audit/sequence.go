package audit

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/countersign/countersign/executor/store"
)

// On a shared store (a fleet on PostgreSQL) no writer extends the chain:
// each would read and write its head, so every two concurrent writes
// would conflict. A writer leaves its record pending in the transaction
// that makes the change (Append), and Sequence, run by one sidecar at a
// time, gives pending records their place: ids, Prev and Hash, in the
// order it reads them, in batches, the way a transparency log sequences
// its leaves. A record is therefore as durable as the change it records
// at once, and in the chain within one sequencing period.

// SequenceBatch is the most records one Sequence moves into the chain.
const SequenceBatch = 500

// sequencerKey is the meta key of the sequencer's lease: which sidecar
// sequences, until when.
const sequencerKey = "audit_sequencer"

// sequencerLease is the lease's value.
type sequencerLease struct {
	Holder  string    `json:"holder"`
	Expires time.Time `json:"expires"`
}

// Sequence moves up to SequenceBatch pending records into the chain, in
// one write transaction, when holder holds the sequencer lease or can take
// it (it is free or expired); the lease is then held for ttl from now.
// With nothing pending it writes nothing, and an idle holder's lease
// lapses. It returns how many records it sequenced; 0 and no error when
// another sidecar holds the lease. A holder paused while sequencing and woken after
// another took the lease over cannot commit: its transaction read the
// lease and the pending records the other then wrote, so PostgreSQL
// refuses one of the two. Every pass that chains writes the lease, so two
// passes always write a row in common: it runs at REPEATABLE READ
// (store.DB.UpdateRows), where that conflict is enough, and its reads of
// the pending records lock nothing the fleet's decisions write.
func (l *Log) Sequence(db *store.DB, holder string, ttl time.Duration) (int, error) {
	var n int
	err := db.UpdateRows(func(tx *store.Tx) error {
		n = 0
		now := l.clock.Now()
		if !takeLease(tx, holder, now) {
			return nil
		}
		type pending struct {
			key []byte
			r   Record
		}
		var batch []pending
		err := tx.EachPendingAudit(SequenceBatch, func(key, value []byte) error {
			r, err := decode(value)
			if err != nil {
				return fmt.Errorf("pending audit record %x: %w", key, err)
			}
			batch = append(batch, pending{key: bytes.Clone(key), r: r})
			return nil
		})
		if err != nil || len(batch) == 0 {
			return err // nothing to do: no write, and the lease may lapse
		}
		if err := renewLease(tx, holder, now.Add(ttl)); err != nil {
			return err
		}
		r, err := l.chain(tx, batch[0].r)
		for _, p := range batch[1:] {
			if err != nil {
				break
			}
			r, err = l.chainAfter(tx, p.r, head{id: []byte(r.ID), hash: r.Hash})
		}
		if err != nil {
			return err
		}
		for _, p := range batch {
			if err := tx.DeletePendingAudit(p.key); err != nil {
				return err
			}
		}
		n = len(batch)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("sequence the audit: %w", err)
	}
	return n, nil
}

// Pending describes the records not yet sequenced.
type Pending struct {
	// Records is their number.
	Records int
	// Oldest is the time of the oldest of them (zero when none).
	Oldest time.Time
}

// Age is how long the oldest pending record has waited at now.
func (p Pending) Age(now time.Time) time.Duration {
	if p.Records == 0 {
		return 0
	}
	return max(now.Sub(p.Oldest), 0)
}

// Unsequenced reads the pending records' count and the oldest one's time.
func Unsequenced(db *store.DB) (Pending, error) {
	var p Pending
	err := db.View(func(tx *store.Tx) error {
		p = Pending{}
		return tx.EachPendingAudit(0, func(key, value []byte) error {
			r, err := decode(value)
			if err != nil {
				return fmt.Errorf("pending audit record %x: %w", key, err)
			}
			if p.Records++; p.Oldest.IsZero() || r.At.Before(p.Oldest) {
				p.Oldest = r.At
			}
			return nil
		})
	})
	if err != nil {
		return Pending{}, fmt.Errorf("read the unsequenced audit: %w", err)
	}
	return p, nil
}

// Sequencer runs Sequence periodically for one sidecar of a fleet.
type Sequencer struct {
	Log *Log
	DB  *store.DB
	// Holder names this sidecar in the sequencer lease.
	Holder string
	// Every is the period, default DefaultSequenceEvery. The lease lasts
	// ten periods, so a sidecar that stops is taken over within them.
	Every time.Duration
	// Bound is how long a record may wait unsequenced before it is an
	// alert (an error logged, and Waiting above it), default
	// DefaultUnsequencedBound.
	Bound  time.Duration
	Logger *slog.Logger
	// Waiting, when set, is kept at the age in seconds of the oldest
	// record not yet sequenced.
	Waiting interface{ Set(float64) }
}

// Defaults of Sequencer.
const (
	DefaultSequenceEvery    = 200 * time.Millisecond
	DefaultUnsequencedBound = 10 * time.Second
)

// Run sequences every period until ctx ends. A batch that came back full
// runs again at once.
func (s Sequencer) Run(ctx context.Context) {
	if s.Every <= 0 {
		s.Every = DefaultSequenceEvery
	}
	if s.Bound <= 0 {
		s.Bound = DefaultUnsequencedBound
	}
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	t := time.NewTicker(s.Every)
	defer t.Stop()
	for {
		n, err := s.Log.Sequence(s.DB, s.Holder, 10*s.Every)
		if err != nil {
			s.Logger.Warn("audit sequencer", "err", err)
		}
		if n == SequenceBatch {
			continue
		}
		s.check()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// check reads how long the oldest pending record has waited, and raises
// it when past the bound.
func (s Sequencer) check() {
	p, err := Unsequenced(s.DB)
	if err != nil {
		s.Logger.Warn("audit sequencer", "err", err)
		return
	}
	age := p.Age(s.Log.clock.Now())
	if s.Waiting != nil {
		s.Waiting.Set(age.Seconds())
	}
	if age > s.Bound {
		s.Logger.Error("audit records wait to be sequenced past their bound: is any sidecar of the fleet sequencing? check every sidecar's log for audit sequencer errors",
			"unsequenced", p.Records, "oldest_age", age.Round(time.Millisecond).String(), "bound", s.Bound.String())
	}
}
